/* Fault cases for the hang watchdog (tests/diag/run_hang.py). Built with -g: the reports must
 * name this file's lines, found by the driver through the SITE markers. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The faults that sleep (a rank out of MPI, a slow reduction) end when the driver creates the
 * file argv[4], which it does once the hang report is out, or after `secs` at the latest: a fixed
 * sleep would have to outlast the report by a margin under any load and cost that margin every
 * run. A macro, so that the rank waits on the SITE line itself (the report names the first frame
 * of this file on its stack); usleep and access are the C library's, not this file's. */
static const char* g_wake = "";
#define DOZE(secs)                                                                   \
  do {                                                                               \
    for (int t_ = 0; t_ < (secs) * 50 && access(g_wake, F_OK) != 0; ++t_) usleep(20 * 1000); \
  } while (0)

static void fault_marker(int rank, const char* what) {
  printf("FAULT rank %d pid %d %s\n", rank, (int)getpid(), what);
  fflush(stdout);
}

/* cslow: a sum whose first application in each process takes g_op_secs, so that every rank
 * arrives at the allreduce and the time goes inside the collective (a slow reduction, to the
 * watchdog the same evidence as a slow link). */
static int g_op_secs = 0;
static void slow_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  static int slept = 0;
  int i;
  (void)type;
  if (!slept) {
    slept = 1;
    DOZE(g_op_secs); /* SITE:slow_op */
  }
  for (i = 0; i < *len; ++i) ((double*)inout)[i] += ((double*)in)[i];
}

int main(int argc, char** argv) {
  int provided = 0;
  const char* mode = argc > 1 ? argv[1] : "none";
  if (!strcmp(mode, "isleep_thread")) /* HIER_PROGRESS=thread needs MPI_THREAD_MULTIPLE */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  else
    MPI_Init(&argc, &argv);
  const int secs = argc > 2 ? atoi(argv[2]) : 4;
  if (argc > 4) g_wake = argv[4];
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int victim = 1 % size;
  double x = rank + 1, y = 0;
  int i;
  for (i = 0; i < 3; ++i) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* no fault here */

  if (!strcmp(mode, "hostile")) {
    /* The driver attacks every rank's side channel while all wait here, outside MPI, until it
     * creates the file argv[3]; then the sleep case must still be reported. */
    const char* go = argc > 3 ? argv[3] : "";
    printf("READY rank %d pid %d\n", rank, (int)getpid());
    fflush(stdout);
    while (access(go, F_OK) != 0) usleep(20 * 1000);
    mode = "sleep";
  } else if (!strcmp(mode, "symlink")) {
    mode = "sleep"; /* the driver planted symlinks at the report paths */
  }

  if (!strcmp(mode, "sleep")) {
    if (rank == victim) {
      fault_marker(rank, "sleep");
      DOZE(secs); /* SITE:sleep */
    }
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:allreduce */
  } else if (!strcmp(mode, "isleep") || !strcmp(mode, "isleep_thread") || !strcmp(mode, "itest")) {
    /* Nonblocking: the others wait in MPI_Wait (or a loop of MPI_Test) on an MPI_Iallreduce that
     * rank 1 has not started. */
    MPI_Request req;
    int flag = 0;
    if (rank == victim) {
      fault_marker(rank, "sleep");
      DOZE(secs); /* SITE:isleep */
    }
    MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    if (!strcmp(mode, "itest"))
      while (!flag) {
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE); /* SITE:test */
        usleep(1000);
      }
    else
      MPI_Wait(&req, MPI_STATUS_IGNORE); /* SITE:wait */
  } else if (!strcmp(mode, "istop")) {
    MPI_Request req;
    if (rank == victim) {
      fault_marker(rank, "stop");
      raise(SIGSTOP);
    }
    MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE); /* SITE:iwait_stop */
  } else if (!strcmp(mode, "imismatch")) {
    int n = 1 << 16;
    double* buf = calloc((size_t)n, sizeof(double));
    double* out = calloc((size_t)n, sizeof(double));
    MPI_Request req;
    if (rank == victim) {
      fault_marker(rank, "mismatch");
      /* One value: the MPIs match a nonblocking collective's messages by the communicator's
       * sequence of them, so the others' allreduce may receive this broadcast's data. Shorter
       * than what they expect, it hangs them; 64 Ki values overran their buffers now and then
       * (Open MPI: "MPI Error in NBC subrequest: 15", the truncation, and an abort before the
       * watchdog's limit, 1 run in 3 under load). Sent at once, the broadcast then completes
       * here: rank 1 then waits outside MPI (below) until the driver ends the job, rather than
       * in the barrier, which would be a hang of its own (and, in Open MPI, let the others'
       * allreduce return). */
      MPI_Ibcast(buf, 1, MPI_DOUBLE, victim, MPI_COMM_WORLD, &req); /* SITE:ibcast_mm */
    } else {
      /* Open MPI blocks inside this call on a mismatch: the report names this line then */
      MPI_Iallreduce(buf, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req); /* SITE:iallreduce_mm */
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE); /* SITE:iwait_mm */
    if (rank == victim) sleep((unsigned)secs);
    MPI_Barrier(MPI_COMM_WORLD);
    free(buf);
    free(out);
  } else if (!strcmp(mode, "ipersist")) {
#if MPI_VERSION >= 4
    /* A persistent allreduce (MPI-4): initialized by all, started by all but rank 1, who sleeps. */
    MPI_Request req;
    MPI_Allreduce_init(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    if (rank == victim) {
      fault_marker(rank, "sleep");
      DOZE(secs); /* SITE:psleep */
    }
    MPI_Start(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE); /* SITE:pwait */
    MPI_Request_free(&req);
#endif
  } else if (!strcmp(mode, "cslow")) {
    /* Communication slow: every rank in the allreduce, which takes `secs` inside the MPI. */
    MPI_Op op;
    MPI_Op_create(slow_sum, 1, &op);
    g_op_secs = secs;
    if (rank == 0) fault_marker(rank, "slow-op");
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, op, MPI_COMM_WORLD); /* SITE:allreduce_cslow */
    MPI_Op_free(&op);
  } else if (!strcmp(mode, "stop")) {
    if (rank == victim) {
      fault_marker(rank, "stop");
      raise(SIGSTOP); /* SITE:stop */
    }
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:allreduce_stop */
  } else if (!strcmp(mode, "kill")) {
    if (rank == victim) {
      fault_marker(rank, "kill");
      raise(SIGKILL);
    }
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:allreduce_kill */
  } else if (!strcmp(mode, "mismatch")) {
    int n = 1 << 16;
    double* buf = calloc((size_t)n, sizeof(double));
    double* out = calloc((size_t)n, sizeof(double));
    if (rank == victim) {
      fault_marker(rank, "mismatch");
      MPI_Bcast(buf, n, MPI_DOUBLE, victim, MPI_COMM_WORLD); /* SITE:bcast */
    } else {
      MPI_Allreduce(buf, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:allreduce_mm */
    }
    MPI_Barrier(MPI_COMM_WORLD); /* SITE:barrier_mm */
    free(buf);
    free(out);
  } else if (!strcmp(mode, "skip")) {
    /* A mismatched call order: rank 1 skips the second of three allreduces, so that its third
     * completes the others' second; the others then wait in their third while rank 1 is out of
     * MPI, until it makes one more (once the driver has the report). The flight recorder names
     * the skipped call. */
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank != victim) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:skip_skipped */
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:skip_third */
    if (rank == victim) {
      fault_marker(rank, "skip");
      DOZE(secs); /* SITE:skip_late */
      MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
  } else if (!strcmp(mode, "split")) {
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, half);
    if (rank == size - 1) {
      fault_marker(rank, "sleep-split");
      DOZE(secs); /* SITE:sleep_split */
    }
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, half); /* SITE:allreduce_split */
    MPI_Comm_free(&half);
  }
  /* After the split case's hang, a world collective would be a second (consequential) hang. */
  if (strcmp(mode, "split"))
    for (i = 0; i < 3; ++i) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("DONE %g\n", y);
  MPI_Finalize();
  return 0;
}
