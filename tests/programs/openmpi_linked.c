/* Linked against Open MPI's libmpi.so.40 without its headers (Debian ships
 * Open MPI's runtime, not always its -dev package): enough to be refused. */
extern int MPI_Init(int *argc, char ***argv);
extern int MPI_Finalize(void);
int main(int argc, char **argv) { MPI_Init(&argc, &argv); return MPI_Finalize(); }
