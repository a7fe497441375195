/* Four threads, each with its own duplicate of MPI_COMM_WORLD, run 100 MPI_Allreduce each at
 * the same time (MPI_THREAD_MULTIPLE): libhier's guard and counters must be thread-safe. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

enum { THREADS = 4, ITERS = 100 };
static MPI_Comm comms[THREADS];
static long results[THREADS];

static void* work(void* arg) {
  int t = (int)(long)arg, rank;
  MPI_Comm_rank(comms[t], &rank);
  long acc = 0;
  for (int i = 0; i < ITERS; ++i) {
    long x = rank * 1000 + t * 100 + i, y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, comms[t]);
    acc += y;
  }
  results[t] = acc;
  return NULL;
}

int main(int argc, char** argv) {
  int provided = 0, rank = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_MULTIPLE) {
    printf("rank %d no MPI_THREAD_MULTIPLE (%d): single-threaded fallback\n", rank, provided);
  }
  for (int t = 0; t < THREADS; ++t) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
  pthread_t th[THREADS];
  int threaded = provided >= MPI_THREAD_MULTIPLE;
  for (int t = 0; t < THREADS; ++t) {
    if (threaded) pthread_create(&th[t], NULL, work, (void*)(long)t);
    else work((void*)(long)t);
  }
  if (threaded)
    for (int t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  for (int t = 0; t < THREADS; ++t) {
    printf("rank %d thread %d sum %ld\n", rank, t, results[t]);
    MPI_Comm_free(&comms[t]);
  }
  MPI_Finalize();
  return 0;
}
