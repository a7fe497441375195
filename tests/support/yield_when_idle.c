/* Test-only preload for MPICH runs (never part of libhier.so): the tests start up to 9 ranks on
 * 2 cores, and MPICH 4.0's ch4:ucx device busy-polls ucp_worker_progress() while it waits, so a
 * waiting rank burns its whole time slice while the rank it waits for sits descheduled; every
 * message then costs a scheduler tick. Open MPI yields on its own when oversubscribed
 * (mpi_yield_when_idle); MPICH's ch4 has no setting for it (MPIR_CVAR_POLLS_BEFORE_YIELD=1 and
 * UCX_TLS=self,sm changed nothing, measured: bench/RESULTS.md, "Test suite time").
 * This wrapper gives the core away after a poll that found nothing, which makes the MPICH tests
 * 3.5x faster on 2 cores (1.4-9x per test); what the MPI computes and in which order is
 * unchanged (progress is still driven by the same calls). cmake/HierTesting.cmake adds it to
 * every MPICH test's LD_PRELOAD (cache option HIER_TEST_YIELD, ON by default). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>

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
