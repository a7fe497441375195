/* Passthrough overhead of libhier's wrappers: 8-byte MPI_Allreduce and 8-byte MPI_Send/Recv.
 * Run it with libhier preloaded: in one process it alternates blocks of MPI_X (through the
 * wrapper) and PMPI_X (straight to the MPI), so both see the same machine state; the median of
 * the per-block differences is the wrapper's cost. Without preload, MPI_X == PMPI_X and the
 * difference measures the noise floor. Usage: overhead [iterations per block] [blocks] [wall|cpu]
 * cpu: blocks are timed with this thread's CPU time (CLOCK_THREAD_CPUTIME_ID) instead of
 * MPI_Wtime, which leaves out the time the rank was descheduled: the figure to use on a loaded
 * or oversubscribed machine (a rank spinning in MPI burns CPU while it waits, so the world cases
 * still count the wait). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int use_cpu = 0;
static double now_s(void) {
  if (!use_cpu) return MPI_Wtime();
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}
static double median(double* v, int n) {
  qsort(v, n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef int (*allreduce_fn)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*send_fn)(const void*, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_fn)(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status*);

static double time_allreduce(allreduce_fn f, MPI_Comm comm, int iters) {
  double x = 1.0, y = 0.0;
  PMPI_Barrier(comm);
  double t0 = now_s();
  for (int i = 0; i < iters; ++i) f(&x, &y, 1, MPI_DOUBLE, MPI_SUM, comm);
  return (now_s() - t0) / iters * 1e9;
}

static double time_pingpong(send_fn s, recv_fn r, MPI_Comm comm, int iters) {
  int rank;
  double x = 1.0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Barrier(comm);
  double t0 = now_s();
  for (int i = 0; i < iters; ++i) {
    if (rank == 0) { s(&x, 1, MPI_DOUBLE, 1, 0, comm); r(&x, 1, MPI_DOUBLE, 1, 0, comm, MPI_STATUS_IGNORE); }
    else if (rank == 1) { r(&x, 1, MPI_DOUBLE, 0, 0, comm, MPI_STATUS_IGNORE); s(&x, 1, MPI_DOUBLE, 0, 0, comm); }
  }
  return (now_s() - t0) / iters * 1e9 / 2;  /* one way: one send + one recv */
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int iters = argc > 1 ? atoi(argv[1]) : 20000, blocks = argc > 2 ? atoi(argv[2]) : 21;
  use_cpu = argc > 3 && !strcmp(argv[3], "cpu");
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double *w = malloc(sizeof(double) * blocks), *p = malloc(sizeof(double) * blocks), *d = malloc(sizeof(double) * blocks);
  struct { const char* name; MPI_Comm comm; } cases[] = {{"allreduce 8 B, MPI_COMM_SELF", MPI_COMM_SELF},
                                                        {"allreduce 8 B, MPI_COMM_WORLD", MPI_COMM_WORLD}};
  if (rank == 0) printf("%-34s %12s %12s %12s %9s   (%s time)\n", "case (median of blocks)", "wrapped ns", "PMPI ns", "diff ns", "ratio",
                        use_cpu ? "thread CPU" : "wall");
  for (int c = 0; c < 2; ++c) {
    time_allreduce(MPI_Allreduce, cases[c].comm, iters / 10);  /* warm-up */
    for (int b = 0; b < blocks; ++b) {
      /* Alternate the order so neither variant always runs first. */
      if (b % 2) { w[b] = time_allreduce(MPI_Allreduce, cases[c].comm, iters); p[b] = time_allreduce(PMPI_Allreduce, cases[c].comm, iters); }
      else { p[b] = time_allreduce(PMPI_Allreduce, cases[c].comm, iters); w[b] = time_allreduce(MPI_Allreduce, cases[c].comm, iters); }
      d[b] = w[b] - p[b];
    }
    double mw = median(w, blocks), mp = median(p, blocks), md = median(d, blocks);
    if (rank == 0) printf("%-34s %12.1f %12.1f %12.1f %9.4f\n", cases[c].name, mw, mp, md, mw / mp);
  }
  if (size >= 2) {
    time_pingpong(MPI_Send, MPI_Recv, MPI_COMM_WORLD, iters / 10);
    for (int b = 0; b < blocks; ++b) {
      if (b % 2) { w[b] = time_pingpong(MPI_Send, MPI_Recv, MPI_COMM_WORLD, iters); p[b] = time_pingpong(PMPI_Send, PMPI_Recv, MPI_COMM_WORLD, iters); }
      else { p[b] = time_pingpong(PMPI_Send, PMPI_Recv, MPI_COMM_WORLD, iters); w[b] = time_pingpong(MPI_Send, MPI_Recv, MPI_COMM_WORLD, iters); }
      d[b] = w[b] - p[b];
    }
    double mw = median(w, blocks), mp = median(p, blocks), md = median(d, blocks);
    if (rank == 0) printf("%-34s %12.1f %12.1f %12.1f %9.4f\n", "send+recv 8 B (one way)", mw, mp, md, mw / mp);
  }
  free(w); free(p); free(d);
  MPI_Finalize();
  return 0;
}
