/* Test-only preload (never part of libhier.so): the tests start up to 9 ranks on 2 cores, and a
 * rank that waits inside the MPI polls. cmake/HierTesting.cmake adds it to every MPI test's
 * LD_PRELOAD, both MPIs (cache option HIER_TEST_YIELD, ON by default). Two parts:
 * - MPICH 4.0's ch4:ucx device busy-polls ucp_worker_progress() while it waits, so a waiting
 *   rank burns its whole time slice while the rank it waits for sits descheduled; every message
 *   then costs a scheduler tick. Open MPI yields on its own when oversubscribed
 *   (mpi_yield_when_idle); MPICH's ch4 has no setting for it (MPIR_CVAR_POLLS_BEFORE_YIELD=1 and
 *   UCX_TLS=self,sm changed nothing, measured: bench/RESULTS.md, "Test suite time"). The wrapper
 *   below gives the core away after a poll that found nothing, which made the MPICH tests 3.5x
 *   faster on 2 cores (1.4-9x per test).
 * - sched_yield naps once a thread only yields (below).
 * What the MPI computes and in which order is unchanged (progress is still driven by the same
 * calls). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct ucp_worker *ucp_worker_h; /* opaque in UCX's API too; no UCX header needed */
typedef unsigned (*progress_fn)(ucp_worker_h);

unsigned ucp_worker_progress(ucp_worker_h worker) {
  /* Atomic: threads may race to store the same pointer (ThreadSanitizer would report a plain one). */
  static progress_fn next;
  progress_fn fn = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
  if (!fn) {
    fn = (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
    __atomic_store_n(&next, fn, __ATOMIC_RELEASE);
  }
  unsigned events = fn(worker);
  if (events == 0) sched_yield();
  return events;
}

/* sched_yield, for every caller in the process (the MPI's progress loop, the wrapper above,
 * libhier's own waits): when every core is taken by waiting ranks, a yield hands the core to
 * another yielder, and a test whose ranks all wait (a hang case's, for seconds) turns both
 * cores into system time that the tests beside it needed (perf over a suite run: a quarter of
 * the machine in the hang cases' sched_yield). A thread that yields again and again with almost
 * nothing done in between is waiting, not working: after kStreak such yields in a row it naps
 * kNapNs instead, which frees the core for a rank with work. A gap of kWorkNs or more between
 * two yields means the thread worked: the streak starts over. A message that arrives during a
 * nap waits for its end. */
enum { kStreak = 16 };
static const long kWorkNs = 20000, kNapNs = 50000;

static long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

int sched_yield(void) {
  static __thread unsigned streak;
  static __thread long left; /* when this thread's last yield returned */
  if (now_ns() - left >= kWorkNs) streak = 0;
  if (++streak <= kStreak) {
    syscall(SYS_sched_yield);
  } else {
    const struct timespec nap = {0, kNapNs};
    nanosleep(&nap, 0);
  }
  left = now_ns();
  return 0;
}
