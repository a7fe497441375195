/* A few collectives for HIER_TRACE (run_trace.py): blocking allreduce, bcast and allgather, and a
 * nonblocking allreduce, on MPI_COMM_WORLD. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int n = 1 << 16;
  float* a = malloc(sizeof(float) * n);
  float* b = malloc(sizeof(float) * n);
  float* g = malloc(sizeof(float) * n * size);
  for (int i = 0; i < n; ++i) a[i] = (float)(rank + i % 7);
  int bad = 0;
  for (int k = 0; k < 3; ++k) {
    MPI_Allreduce(a, b, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    bad |= b[1] != (float)(size * (size - 1) / 2 + size);
  }
  MPI_Bcast(b, n, MPI_FLOAT, 1, MPI_COMM_WORLD);
  MPI_Allgather(a, n, MPI_FLOAT, g, n, MPI_FLOAT, MPI_COMM_WORLD);
  MPI_Request r;
  MPI_Iallreduce(a, b, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  bad |= b[1] != (float)(size * (size - 1) / 2 + size);
  if (bad) fprintf(stderr, "rank %d: wrong result\n", rank);
  free(a);
  free(b);
  free(g);
  MPI_Finalize();
  return bad;
}
