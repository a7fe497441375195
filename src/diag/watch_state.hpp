// What the watchdog's files share inside src/diag (not for other layers). One job per file:
//  - comm_watch.cpp: a communicator's watch state (identity shared by its members, sequence
//    numbers, the signatures of its last collectives);
//  - call_slots.cpp: each thread's blocking collective in flight (the hot path) and its reads;
//  - watch_requests.cpp: the collective requests a rank waits for;
//  - status_answer.cpp: this rank's answer to "where are you?" on the side channel;
//  - hang_investigation.cpp: asking every member, the hang report, its file and its completion;
//  - watchdog.cpp: the watchdog thread, its start at MPI_Init and its stop at finalize.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "diag/hang_report.hpp"
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

// ---- comm_watch.cpp
// Makes the attribute key that carries a communicator's watch state (once, at MPI_Init).
void comm_watch_init();
// The communicator's watch state; nullptr when it is not watched (null, intercommunicator).
CommWatch* watch_comm(MPI_Comm comm);
// The next sequence number on `w`, with the call's signature recorded for the mismatch check.
uint64_t watch_next_seq(CommWatch* w, int fn, int64_t count, int root);
// The flight recorder numbers a call before the watchdog's bookkeeping sees it: the number is
// kept for this thread's call until taken (watch_take_number: the same number for the same
// communicator, else the next one) or forgotten at the call's end.
uint64_t watch_number_call(CommWatch* w, int fn, int64_t count, int root);
uint64_t watch_take_number(CommWatch* w, int fn, int64_t count, int root);
void watch_forget_number();
// A watched communicator by its key (nullptr: none this rank knows).
CommWatch* comm_by_key(uint64_t key);
uint64_t watch_now_ns();  // CLOCK_MONOTONIC, the clock of every t0_ns

// ---- call_slots.cpp
// A blocking call's slot (or a waited-for request) as the watchdog thread reads it.
struct CallView : WatchedCall {
  bool active = false;
  uint64_t gen = 0;
};
CallView read_slot(CallSlot& s);
int n_call_slots();
CallSlot& call_slot(int i);

// ---- watch_requests.cpp
// A nonblocking or started persistent collective whose rank waits for it (MPI_Wait*, or a loop
// of MPI_Test*): ra and t0_ns are the first MPI_Wait / MPI_Test call's site and time.
struct PendingCall : WatchedCall {
  uint64_t id = 0;  // unique per start: the watchdog investigates each at most once
};
std::vector<PendingCall> waiting_requests();
// A collective request waited for, seen as the blocking call it stands for.
CallView view_of(const PendingCall& p);

// ---- watchdog.cpp: what this rank's watchdog was started with (valid once g_watch_on is set).
struct WatchConfig {
  double limit_s = 0;
  int rank = -1, size = 0;
  int main_tid = 0;        // the thread that called MPI_Init
  std::string report_dir;  // where hang files go ("" = no file)
};
const WatchConfig& watch_config();

// ---- status_answer.cpp
// This rank's answer to "where are you with communicator `key`?" (one line), and its parse.
std::string status_line(uint64_t key, uint64_t asked_seq, bool brief);
bool parse_status(const std::string& line, MemberStatus& m);

// ---- hang_investigation.cpp
// The watchdog's name for one call: (slot address, generation) for a blocking call, (0, start id)
// for a collective request.
using CallId = std::pair<uintptr_t, uint64_t>;
// Asks the members, builds and writes the report (only the lowest member waiting in the call).
void investigate(const CallView& cv, CallId id);
// Rewrites the reports whose call completed since the last tick.
void check_open_hangs();

}  // namespace hier::diag
