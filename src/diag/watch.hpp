// Hang watchdog, hot path (HIER_WATCHDOG=seconds). Each blocking collective records, in a few
// plain stores and one attribute lookup, which communicator it runs on, its sequence number
// there, a signature (function, count, root) and its call site (the return address into the
// caller). A thread per rank (watch.cpp) reads that state, never calls MPI, and talks to the
// other ranks over a TCP side channel when a collective has waited past the limit.
// Watchdog off: not reached (DiagScope, diag/sites.hpp, tests g_watch_on).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace hier::diag {

extern bool g_watch_on;  // set once at MPI_Init, before any wrapped collective can run

// What a rank knows about one communicator: its identity shared by all members (a hash of the
// world ranks of its members and how many communicators with the same members this rank saw
// before it), its size, and how many collectives this rank started on it.
struct CommWatch;

// One in-flight blocking collective per thread (seqlock: odd `gen` while being written).
struct CallSlot {
  std::atomic<uint64_t> gen{0};
  std::atomic<int> active{0};
  CommWatch* comm = nullptr;
  uint64_t seq = 0;
  int fn = 0;
  int root = -1;
  int64_t count = -1;
  const void* ra = nullptr;
  uint64_t t0_ns = 0;
};

CallSlot* this_thread_slot();
// t0_ns: the call's start, CLOCK_MONOTONIC (taken once by DiagScope for the timing too).
void watch_begin(CallSlot* s, int fn, MPI_Comm comm, int64_t count, int root, const void* ra, uint64_t t0_ns);
inline void watch_end(CallSlot* s) { s->active.store(0, std::memory_order_release); }

// Lifecycle (core/lifecycle.cpp): at MPI_Init after the configuration agreement (one
// PMPI_Allgather of the side-channel addresses on MPI_COMM_WORLD), and at finalize.
void watch_init(double limit_s, int world_rank, int world_size, const char* report_template);
void watch_finalize();

// The hang reports this rank wrote, as a JSON array (the finalize report's "hangs").
std::string hangs_json();

}  // namespace hier::diag
