/* Prints which MPI library runs it (rank 0) and every rank: the proof of an ABI swap. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING]; int len, rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_library_version(version, &len);
  if (rank == 0) printf("library: %.60s\n", version);
  printf("rank %d of %d\n", rank, size);
  MPI_Finalize(); return 0;
}
