// Hang watchdog, hot path (HIER_WATCHDOG=seconds). Each blocking collective records, in a few
// plain stores and one attribute lookup, which communicator it runs on, its sequence number
// there, a signature (function, count, root) and its call site (the return address into the
// caller). A thread per rank (watchdog.cpp) reads that state, never calls MPI, and talks to the
// other ranks over a TCP side channel when a collective has waited past the limit
// (hang_investigation.cpp). The files and their jobs: diag/watch_state.hpp.
// Watchdog off: not reached (DiagScope, diag/sites.hpp, tests g_watch_on).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hier::diag {

extern bool g_watch_on;  // set once at MPI_Init, before any wrapped collective can run

// What a rank knows about one communicator: its identity shared by all members (a hash of the
// world ranks of its members and how many communicators with the same members this rank saw
// before it), its size, and how many collectives this rank started on it.
struct CommWatch;

// What the watchdog knows of one collective call, blocking or not: the communicator, the call's
// sequence number there, its signature (function, count, root), a call site (the return address
// into the caller) and since when the rank waits in it (CLOCK_MONOTONIC ns). One struct for the
// blocking calls' slots, the requests' list and the watchdog's views, so they cannot drift apart.
struct WatchedCall {
  CommWatch* comm = nullptr;
  uint64_t seq = 0;
  int fn = 0;
  int root = -1;
  int64_t count = -1;
  const void* ra = nullptr;
  uint64_t t0_ns = 0;
};

// One in-flight blocking collective per thread (seqlock: odd `gen` while being written).
struct CallSlot {
  std::atomic<uint64_t> gen{0};
  std::atomic<int> active{0};
  WatchedCall call;
};

CallSlot* this_thread_slot();
// t0_ns: the call's start, CLOCK_MONOTONIC (taken once by DiagScope for the timing too).
void watch_begin(CallSlot* s, int fn, MPI_Comm comm, int64_t count, int root, const void* ra, uint64_t t0_ns);
inline void watch_end(CallSlot* s) { s->active.store(0, std::memory_order_release); }

// Nonblocking and persistent collectives (watch_requests.cpp; generated wrappers of the icoll and
// request families). MPI_I... takes the communicator's next sequence number when it is called
// (while it runs, its thread's slot shows it, as for a blocking call: an MPI_I... call that
// blocks is seen) and keeps it with its request; a persistent collective takes one at each
// MPI_Start. The Wait and Test family marks the requests it is given as waited for (from the
// first wait or test on), and drops them when they complete; the watchdog thread treats a
// request waited for longer than the limit as a blocking call that long in its collective.
class StartScope {
 public:
  StartScope(int fn, MPI_Comm comm, int64_t count, int root, const void* ra) {
    if (__builtin_expect(!g_watch_on, 1)) return;
    begin(fn, comm, count, root, ra);
  }
  ~StartScope() {
    if (__builtin_expect(slot_ != nullptr, 0)) watch_end(slot_);
  }
  // The call returned MPI_SUCCESS with this request.
  void started(const MPI_Request* req) {
    if (__builtin_expect(comm_ != nullptr, 0)) keep(req);
  }
  StartScope(const StartScope&) = delete;
  StartScope& operator=(const StartScope&) = delete;

 private:
  void begin(int fn, MPI_Comm comm, int64_t count, int root, const void* ra) noexcept;
  void keep(const MPI_Request* req) noexcept;

  CallSlot* slot_ = nullptr;
  CommWatch* comm_ = nullptr;
  uint64_t seq_ = 0;
  int fn_ = 0, root_ = -1;
  int64_t count_ = -1;
};

// A persistent collective's request (MPI_..._init): watched from each MPI_Start on.
void watch_persistent_made(int fn, MPI_Comm comm, int64_t count, int root, const MPI_Request* req);

// One call of the request family (Wait*, Test*, Start*, Request_free) on r[0..n).
class RequestScope {
 public:
  RequestScope(int fn, int n, MPI_Request* r, const void* ra) {
    if (__builtin_expect(!g_watch_on, 1)) return;
    begin(fn, n, r, ra);
  }
  ~RequestScope() {
    if (__builtin_expect(on_, 0)) end();
  }
  // What the call completed (besides requests it set to MPI_REQUEST_NULL): all of them, the one
  // at `index`, or the `outcount` at `indices` (MPI_UNDEFINED: none).
  void all_done() { all_ = true; }
  void index_done(int index) {
    if (on_ && index >= 0) done_.push_back(index);
  }
  void some_done(int outcount, const int* indices) {
    for (int i = 0; on_ && i < outcount; ++i) done_.push_back(indices[i]);
  }
  RequestScope(const RequestScope&) = delete;
  RequestScope& operator=(const RequestScope&) = delete;

 private:
  void begin(int fn, int n, MPI_Request* r, const void* ra) noexcept;
  void end() noexcept;

  bool on_ = false, all_ = false;
  MPI_Request* r_ = nullptr;
  std::vector<std::pair<int, MPI_Request>> watched_;  // index into r_, handle before the call
  std::vector<int> done_;
};

// Lifecycle (core/lifecycle.cpp): at MPI_Init after the configuration agreement (one
// PMPI_Allgather of the side-channel addresses on MPI_COMM_WORLD), and at finalize.
void watch_init(double limit_s, int world_rank, int world_size, const char* report_template);
void watch_finalize();

// The hang reports this rank wrote, as a JSON array (the finalize report's "hangs").
std::string hangs_json();

}  // namespace hier::diag
