/* The program of the PMPI tool tests (run_tools.py): collectives libhier rewrites (a large
 * allreduce and bcast, hierarchical under HIER_LEVELS=node:2 HIER_ALGO=hier; a nonblocking
 * allreduce and its wait) and calls it passes through (barrier, send/recv, comm_dup). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 4096, ROUNDS = 3 };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double* x = malloc(N * sizeof(double));
  double* y = malloc(N * sizeof(double));
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  for (int round = 0; round < ROUNDS; ++round) {
    for (int i = 0; i < N; ++i) x[i] = rank + i % 7 + round;
    MPI_Allreduce(x, y, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double sum = 0;
    for (int i = 0; i < N; ++i) sum += y[i];
    if (rank == 0)
      for (int i = 0; i < N; ++i) x[i] = i * 0.5 + round;
    MPI_Bcast(x, N, MPI_DOUBLE, 0, dup);
    double bsum = 0;
    for (int i = 0; i < N; ++i) bsum += x[i];
    MPI_Request req;
    long v = rank + round, w = 0;
    MPI_Iallreduce(&v, &w, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    long got = -1, mine = 100 * rank + round;
    if (size > 1) {
      if (rank % 2 == 0 && rank + 1 < size) {
        MPI_Send(&mine, 1, MPI_LONG, rank + 1, 7, MPI_COMM_WORLD);
        MPI_Recv(&got, 1, MPI_LONG, rank + 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank % 2 == 1) {
        MPI_Recv(&got, 1, MPI_LONG, rank - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&mine, 1, MPI_LONG, rank - 1, 7, MPI_COMM_WORLD);
      }
    }
    printf("rank %d round %d: allreduce %.1f bcast %.1f iallreduce %ld recv %ld\n", rank, round, sum, bsum, w, got);
    fflush(stdout);  // one short write per line: the launcher interleaves the ranks' pipes
  }
  MPI_Comm_free(&dup);
  free(x);
  free(y);
  MPI_Finalize();
  return 0;
}
