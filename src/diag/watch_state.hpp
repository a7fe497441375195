// What the watchdog's files share inside src/diag (not for other layers): a communicator's
// watch state, its sequence numbers, and the collective requests a rank waits for
// (watch_requests.cpp) as the watchdog thread (watch.cpp) sees them.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "diag/watch.hpp"

namespace hier::diag {

struct CommWatch {
  uint64_t key = 0;  // 0: not watched (intercommunicator)
  int size = 0;
  std::vector<int> world;  // world rank of each member
  std::atomic<uint64_t> seq{0};
  // Signatures of the last collectives, by sequence number modulo kSigRing (mismatch checks).
  static constexpr int kSigRing = 16;
  std::atomic<uint64_t> sig[kSigRing] = {};
  std::atomic<bool> freed{false};
};

// The communicator's watch state; nullptr when it is not watched (null, intercommunicator).
CommWatch* watch_comm(MPI_Comm comm);
// The next sequence number on `w`, with the call's signature recorded for the mismatch check.
uint64_t watch_next_seq(CommWatch* w, int fn, int64_t count, int root);
uint64_t watch_now_ns();  // CLOCK_MONOTONIC, the clock of every t0_ns

// A nonblocking or started persistent collective whose rank waits for it (MPI_Wait*, or a loop
// of MPI_Test*): ra and t0_ns are the first MPI_Wait / MPI_Test call's site and time.
struct PendingCall : WatchedCall {
  uint64_t id = 0;  // unique per start: the watchdog investigates each at most once
};
std::vector<PendingCall> waiting_requests();

}  // namespace hier::diag
