// C4's four classes from the evidence of one hang (rules in c4_class.hpp).
#include "diag/c4_class.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "diag/ranks_text.hpp"

namespace hier::diag {

namespace {

struct ClassNames {
  const char* key;
  const char* text;
};
// Indexed by C4Class.
constexpr ClassNames kNames[] = {
    {"communication_hang", "communication hang"},
    {"non_communication_hang", "non-communication hang"},
    {"communication_slow", "communication slow"},
    {"non_communication_slow", "non-communication slow"},
};

const char* where_text(Whereabouts w) {
  switch (w) {
    case Whereabouts::InCall: return "in the call";
    case Whereabouts::Ahead: return "past the call";
    case Whereabouts::InOtherCollective: return "in a collective on another communicator";
    case Whereabouts::InOtherMpiCall: return "in another MPI call";
    case Whereabouts::OutsideMpi: return "not in MPI";
    case Whereabouts::Stopped: return "not responding (stopped?)";
    case Whereabouts::Gone: return "gone";
    case Whereabouts::Unreachable: return "unreachable (node or link down?)";
  }
  return "?";
}

bool outside_communication(Whereabouts w) {
  return w == Whereabouts::OutsideMpi || w == Whereabouts::Stopped || w == Whereabouts::Gone;
}

// "ranks 1,3 not in MPI; rank 2 gone" for the members `pick` selects, grouped by whereabouts.
template <class Pred>
std::string members_text(const C4Evidence& e, Pred pick) {
  std::map<Whereabouts, std::vector<int>> by;
  for (const auto& [rank, w] : e.members)
    if (pick(w)) by[w].push_back(rank);
  std::string s;
  for (const auto& [w, ranks] : by)
    s += (s.empty() ? "" : "; ") + std::string(ranks.size() > 1 ? "ranks " : "rank ") + ranks_text(ranks) + " " +
         where_text(w);
  return s;
}

}  // namespace

const char* c4_key(C4Class c) { return kNames[static_cast<int>(c)].key; }
const char* c4_text(C4Class c) { return kNames[static_cast<int>(c)].text; }

C4Verdict classify_hang(const C4Evidence& e) {
  C4Verdict v;
  int in_call = 0, ahead = 0;
  bool outside = false, other_comm = false;
  for (const auto& [rank, w] : e.members) {
    in_call += w == Whereabouts::InCall;
    ahead += w == Whereabouts::Ahead;
    outside = outside || outside_communication(w);
    other_comm = other_comm || w == Whereabouts::InOtherCollective || w == Whereabouts::InOtherMpiCall ||
                 w == Whereabouts::Unreachable;
  }
  if (e.mismatch) {
    v.cls = C4Class::CommunicationHang;
    v.basis = "the members called different collectives at this sequence number";
  } else if (outside) {
    v.cls = C4Class::NonCommunicationHang;
    v.basis = "never reached the call: " + members_text(e, outside_communication);
  } else if (other_comm) {
    v.cls = C4Class::CommunicationHang;
    v.basis = "blocked in other communication: " + members_text(e, [](Whereabouts w) {
                return w != Whereabouts::InCall && w != Whereabouts::Ahead;
              });
  } else {
    v.cls = C4Class::CommunicationHang;
    v.basis = "every member reached the call (" + std::to_string(in_call) + " in it" +
              (ahead ? ", " + std::to_string(ahead) + " past it" : std::string()) + ") and it does not complete";
  }
  const bool gone = std::any_of(e.members.begin(), e.members.end(), [](const auto& m) { return m.second == Whereabouts::Gone; });
  if (e.completed_after_s >= 0 && (gone || e.mismatch)) {
    // No collective completes without a member that died, nor across different collectives:
    // the call returned an error (or wrong data). Still the hang it was, not a slow call.
    char b[96];
    std::snprintf(b, sizeof b, "; the call returned after %.2f s, which only an error return explains", e.completed_after_s);
    v.basis += b;
  } else if (e.completed_after_s >= 0) {
    char b[64];
    std::snprintf(b, sizeof b, "the call completed after %.2f s; ", e.completed_after_s);
    if (v.cls == C4Class::NonCommunicationHang) {
      v.cls = C4Class::NonCommunicationSlow;
      v.basis = b + std::string("late arrival: ") + members_text(e, outside_communication) + " when asked";
    } else if (other_comm) {  // it waited for members busy in other communication
      v.cls = C4Class::CommunicationSlow;
      v.basis = b + std::string("slow in other communication: ") + v.basis.substr(v.basis.find(": ") + 2);
    } else {
      v.cls = C4Class::CommunicationSlow;
      v.basis = b + std::string("slow inside the collective: ") + v.basis.substr(0, v.basis.find(" and it does not"));
    }
  }
  return v;
}

}  // namespace hier::diag
