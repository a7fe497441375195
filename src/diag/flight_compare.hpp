// The flight recorder's calls as they travel in the side channel's answer, and the comparison
// that finds where the ranks went their own ways: pure functions, no MPI, sockets or clocks
// (tests/unit/hang_report_test.cpp drives them with made-up calls).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hier::diag {

struct MemberStatus;

// One recorded collective call.
struct RecentCall {
  std::string call;      // the MPI function
  uint64_t comm = 0;     // its communicator's watch key (0: not watched, an intercommunicator)
  uint64_t seq = 0;      // its sequence number there
  long long count = -1;  // -1: none, or one that differs by rank in a correct program
  int root = -1;
  uint64_t bytes = 0;    // known once the call returned
  char state = 'C';      // 'E' entered, 'C' completed, 'P' pending (nonblocking, not seen complete)
  std::string site;      // file:line of the call ("" unresolved)
};

const char* recent_state_name(char state);
// "MPI_Allreduce(count 1)", "MPI_Bcast(count 4, root 1)": what must agree between the ranks.
std::string recent_signature(const RecentCall& c);

// Two fields for the side channel (no tab, no newline): the distinct call sites, and the calls;
// at most `max_bytes` in all, the calls on communicator `key` kept first, the oldest dropped first.
std::string encode_recent(const std::vector<RecentCall>& calls, uint64_t key, size_t max_bytes);
// The inverse (false: malformed, `out` then empty).
bool decode_recent(const std::string& sites, const std::string& calls, std::vector<RecentCall>& out);

// Where the members' recent calls on one communicator first part.
struct Divergence {
  enum Kind { None, DifferentCalls, DifferentSites, NeverEntered } kind = None;
  uint64_t seq = 0;  // the first sequence number at which they disagree / a member never entered
  struct Group {
    std::string call, site;  // recent_signature, call site
    std::vector<int> ranks;
  };
  std::vector<Group> groups;  // who called what at `seq` (NeverEntered: the call, and who entered it)
  struct Note {
    int rank = -1;
    std::string what;  // "skipped MPI_Allreduce(count 1) at a.c:4", "never entered ...", ...
  };
  std::vector<Note> notes;  // per member that went its own way
};
// `members`: the answers (recent calls in MemberStatus::recent); `key`, `hung_seq`: the call that
// hangs. Compares the sequence numbers every answering member still holds, from the oldest up.
Divergence find_divergence(const std::vector<MemberStatus>& members, uint64_t key, uint64_t hung_seq);

}  // namespace hier::diag
