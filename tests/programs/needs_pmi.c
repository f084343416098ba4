/* Needs a PMI library (as MVAPICH2 builds for Slurm do) that is not on the
 * library path at run time. */
extern int PMI_Init(int *spawned);
int main(void) { int spawned; return PMI_Init(&spawned); }
