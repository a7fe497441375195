// Per-call-site timing of blocking collectives (HIER_REPORT or HIER_WATCHDOG), the running
// signature of this rank's collectives on MPI_COMM_WORLD, and what is made of them at finalize:
// the report's `call_sites`, `stragglers` (arrival skew, rank 0) and `collective_check`
// (the ranks' collective sequences on MPI_COMM_WORLD compared). docs/diagnostics.md.
// The files and their jobs: site_timing.cpp (DiagScope, the per-thread site tables),
// collective_sequence.cpp (the signatures on MPI_COMM_WORLD and their comparison), sites.cpp
// (sites_init, and the finalize exchange that makes the report's sections).
//
// Hot path (the generated wrapper of every blocking collective): off, one test of a global flag
// (and the same local flag again in the destructor); on, two clock_gettime(CLOCK_MONOTONIC)
// reads (vDSO, no system call), the watchdog's bookkeeping when it is on, and a few plain
// stores into this thread's site table.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "diag/watch.hpp"

namespace hier::diag {

extern bool g_diag_on;  // set once at MPI_Init (agreed by every rank), cleared at finalize

// One blocking collective: started in the constructor, recorded in the destructor.
class DiagScope {
 public:
  DiagScope(int fn, MPI_Comm comm, int64_t count, int root, const void* ra) {
    if (__builtin_expect(!g_diag_on, 1)) return;
    begin(fn, comm, count, root, ra);
  }
  ~DiagScope() {
    if (__builtin_expect(on_, 0)) end();
  }
  // The call's message size (the report's `bytes`), known once the call returned.
  void set_bytes(uint64_t b) { bytes_ = b; }
  DiagScope(const DiagScope&) = delete;
  DiagScope& operator=(const DiagScope&) = delete;

 private:
  void begin(int fn, MPI_Comm comm, int64_t count, int root, const void* ra) noexcept;
  void end() noexcept;

  bool on_ = false;
  int fn_ = 0, root_ = -1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  const void* ra_ = nullptr;
  CallSlot* slot_ = nullptr;
  uint64_t t0_ = 0, bytes_ = 0;
};

// Lifecycle (core/lifecycle.cpp). At MPI_Init, on every rank of MPI_COMM_WORLD: one 4-byte
// PMPI_Allreduce decides whether any rank asked for the report (or the watchdog is on); then
// every rank times its collectives, so that the finalize exchange is made by all or by none.
void sites_init(bool report_here, bool watchdog_on);
// At MPI_Finalize, before the report is written: resolves this rank's call sites and sends
// fixed-size records to rank 0 (PMPI_Gather on a duplicate of MPI_COMM_WORLD), which computes
// stragglers and compares the collective sequences. No-op unless sites_init turned timing on.
void sites_finalize();

}  // namespace hier::diag
