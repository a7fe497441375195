// The hang report as a pure function of the members' answers (watch.cpp gathers them over the side
// channel, side_channel.cpp), and the rule that picks the one rank that asks and writes it. No
// sockets, threads or clocks here: tests/unit/hang_report_test.cpp drives both with made-up
// answers, up to 1,000 ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "diag/flight_compare.hpp"

namespace hier::diag {

// What one member answered about communicator `key` (or how it failed to).
struct MemberStatus {
  int world = -1;
  enum Reach { Ok, Gone, NoAnswer, Unreachable } reach = Ok;
  std::string host;
  long pid = 0;
  bool known = false;          // it has watched this communicator
  uint64_t seq_on_comm = 0;    // collectives it started on it
  uint64_t sig_at_seq = 0;     // its signature at the asked sequence number (0: none)
  bool in_call = false;        // in a watched collective now (any communicator)
  std::string fn;              // that collective
  uint64_t call_key = 0, call_seq = 0;
  long long count = -1;
  int root = -1;
  long elapsed_ms = 0;
  std::string site, doing;     // file:line of the call / what the main thread does when not in one
  bool in_mpi = false;         // not in a collective, but its main thread's stack shows another MPI call
  std::vector<RecentCall> recent;  // its flight recorder's calls, oldest first (HIER_FLIGHT)
};

// A collective's signature as kept per sequence number: function (its blocking base), count, root.
uint64_t call_signature(int base_fn, int64_t count, int root);

// The call that waited past the limit, as the reporting rank sees it.
struct HangCall {
  int reporter = -1;
  double limit_s = 0, waited_s = 0;
  int fn = 0;  // hier::Fn of the call (its name and base come from the generated table)
  uint64_t seq = 0, key = 0;
  int64_t count = -1;
  int root = -1;
  std::vector<int> world;  // world rank of each member of the communicator
};

// Waiting in the very call (communicator and sequence number) that hangs.
bool waiting_in(const MemberStatus& m, uint64_t key, uint64_t seq);

struct HangReport {
  std::vector<std::string> lines;  // the WARN lines, first the HANG: line, last its C4 class
  std::string completed_line;      // completed_after_s >= 0: the WARN line (ENDED: ...) with the class now
  std::string json;                // libhier-hang/1, always valid JSON (invalid UTF-8 replaced)
};

// `members`: one answer per member, in communicator order. Every missing member gets one state:
// not_arrived, in_other_collective, ahead, not_responding or gone. With the flight recorder's
// calls in the answers: every member's `recent_calls` and the first `divergence` between them
// (flight_compare.hpp), also as log lines. The report carries C4's class
// (c4_class.hpp) of that evidence; `completed_after_s` >= 0: the call completed after the report,
// this long after it began (the watchdog rebuilds the report then: the class becomes the slow one,
// the class at the report is kept as `reported_class`).
HangReport build_hang_report(const HangCall& call, const std::vector<MemberStatus>& members,
                             double completed_after_s = -1);

// Who asks everyone and writes the report: the lowest-indexed member waiting in the call. Member
// `me` (waiting) asks `waiting_at(indices)` whether members below it wait in the same call, lowest
// first, in batches that double (1, 2, 4, ...): in the common case (member 0 waits) one question,
// so no rank is asked more than once per other member. Returns the index of the first lower member
// found waiting (then `me` stays quiet), or `me` (it investigates). A member that does not answer
// counts as not waiting.
int pick_investigator(int me, const std::function<std::vector<bool>(const std::vector<int>& indices)>& waiting_at);

// Text from another process made safe for a log line and a JSON string: control characters
// become spaces, the length is capped; invalid UTF-8 is left to the JSON writer's replacement.
std::string clean_text(const std::string& s, size_t max_len = 512);

}  // namespace hier::diag
