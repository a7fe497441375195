/* sendrecv_bw: what the emulated link gives a pair of ranks.
 *
 * Rank i exchanges SIZE bytes each way with rank i + P/2 (MPI_Sendrecv), so with ranks placed
 * node by node on 2 nodes every pair crosses the link. Prints, from rank 0, the median time of
 * ITERS exchanges (after one warm-up) and the rate per direction per pair in MB/s (10^6 B/s).
 * PAIRS limits how many pairs exchange (the first ones); the other ranks wait in the barrier,
 * as idle ranks of a real job would (on 2 cores their polling competes with the active pair).
 *   mpicc.mpich -O2 -o sendrecv_bw sendrecv_bw.c
 *   tools/minicluster run --mpi mpich -- ./sendrecv_bw [SIZE_MIB=16] [ITERS=5] [PAIRS=all]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 16;
  int iters = argc > 2 ? atoi(argv[2]) : 5;
  int pairs = argc > 3 ? atoi(argv[3]) : size / 2;
  if (size % 2 != 0 || mib == 0 || iters < 1 || pairs < 1 || pairs > size / 2) {
    if (rank == 0)
      fprintf(stderr, "sendrecv_bw: needs an even number of ranks, SIZE_MIB>0, ITERS>0, "
                      "1<=PAIRS<=ranks/2\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  size_t bytes = mib << 20;
  int peer = rank < size / 2 ? rank + size / 2 : rank - size / 2;
  int active = (rank < size / 2 ? rank : peer) < pairs;
  char *sbuf = malloc(bytes), *rbuf = malloc(bytes);
  if (!sbuf || !rbuf) MPI_Abort(MPI_COMM_WORLD, 3);
  memset(sbuf, rank & 0xff, bytes);
  memset(rbuf, 0, bytes);
  double *t = malloc(sizeof(double) * (size_t)iters);
  for (int it = -1; it < iters; ++it) {   /* it = -1: warm-up (connection setup) */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (active)
      MPI_Sendrecv(sbuf, (int)bytes, MPI_BYTE, peer, 0, rbuf, (int)bytes, MPI_BYTE, peer, 0,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double dt = MPI_Wtime() - t0, worst;
    /* a round lasts as long as its slowest pair */
    MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (it >= 0) t[it] = worst;
  }
  if (active && (rbuf[0] != (char)(peer & 0xff) || rbuf[bytes - 1] != (char)(peer & 0xff))) {
    fprintf(stderr, "sendrecv_bw: rank %d received wrong data\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 4);
  }
  qsort(t, (size_t)iters, sizeof(double), cmp_double);
  double med = t[iters / 2];
  if (rank == 0)
    printf("sendrecv_bw: %d pairs, %zu MiB each way, median %.3f s (min %.3f), "
           "%.1f MB/s per direction per pair, %.1f MB/s per direction in all\n",
           pairs, mib, med, t[0], bytes / med / 1e6, bytes / med / 1e6 * pairs);
  free(t);
  free(sbuf);
  free(rbuf);
  MPI_Finalize();
  return 0;
}
