// The flight recorder (HIER_FLIGHT=N, default 64; 0: off): every thread that makes collective
// calls keeps its last N of them in a ring of its own: the call, the communicator (its watch key,
// the same on every member), the sequence number there, count, root, bytes, the call site and a
// state (entered, completed, or pending: a nonblocking collective started and not seen complete).
// The hang report reads every reachable rank's rings over the side channel and names the first
// sequence number at which the ranks disagree (flight_compare.hpp). docs/diagnostics.md.
//
// Hot path (the generated wrapper of every blocking and nonblocking collective): the
// communicator's watch state (one thread-local compare when the thread's last communicator is
// the same), its next sequence number, and a few relaxed stores into the thread's ring under a
// per-entry generation count. One writer per ring (its thread), so no lock and no locked
// instruction; the side channel's thread reads a ring entry only when its generation is even and
// unchanged across the read.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

namespace hier::diag {

extern bool g_flight_on;  // set once at MPI_Init (HIER_FLIGHT > 0), cleared at finalize

struct FlightRing;

// Where one recorded call sits: its ring, its slot and its call number in that ring (a slot
// reused since then has another number: the mark is then dropped).
struct FlightRef {
  FlightRing* ring = nullptr;
  uint32_t slot = 0;
  uint64_t n = 0;
};

// One blocking or nonblocking collective: entered in the constructor; completed (blocking) or
// pending (nonblocking, when it returned a request) in the destructor.
class FlightScope {
 public:
  FlightScope(int fn, MPI_Comm comm, int64_t count, int root, const void* ra, bool nonblocking) {
    if (__builtin_expect(g_flight_on, 1)) begin(fn, comm, count, root, ra, nonblocking);
  }
  ~FlightScope() {
    if (__builtin_expect(ref_.ring != nullptr, 1)) end();
  }
  void set_bytes(uint64_t b) { bytes_ = b; }
  // The nonblocking call returned MPI_SUCCESS with its request.
  void started() { started_ = true; }
  FlightScope(const FlightScope&) = delete;
  FlightScope& operator=(const FlightScope&) = delete;

 private:
  void begin(int fn, MPI_Comm comm, int64_t count, int root, const void* ra, bool nonblocking) noexcept;
  void end() noexcept;

  FlightRef ref_;
  uint64_t bytes_ = 0;
  bool nonblocking_ = false, started_ = false;
};

// The call this thread's FlightScope is recording now (ring null: none): the watchdog's request
// list keeps it with the request, to mark the call completed when the request completes.
FlightRef flight_current();
void flight_mark_completed(const FlightRef& r) noexcept;
// A persistent collective started (MPI_Start, followed with the watchdog on): recorded pending.
FlightRef flight_started(int fn, uint64_t key, uint64_t seq, int64_t count, int root, const void* ra) noexcept;

// At MPI_Init (every rank, after the configuration agreement): n calls per thread, 0 = off.
void flight_init(int n);
void flight_finalize();

// This rank's recent calls for the side channel's answer: two fields without tabs or newlines,
// the call sites (resolved to file:line when `resolve`) and the calls, at most `max_bytes` in all;
// the calls on communicator `key` first, the oldest dropped first.
std::string flight_answer(uint64_t key, bool resolve, size_t max_bytes);

}  // namespace hier::diag
