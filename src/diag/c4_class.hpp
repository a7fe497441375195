// C4's four classes of a stalled or slow collective, as one vocabulary for the watchdog's hang
// reports (hang_report.cpp) and the finalize report's stragglers (sites.cpp). The class is a pure
// function of measured evidence, where each member of the communicator was when asked over the
// side channel and whether the call later completed, so tests/unit/c4_class_test.cpp decides
// every rule on made-up evidence. The rules: docs/diagnostics.md, "The four classes".
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hier::diag {

enum class C4Class { CommunicationHang, NonCommunicationHang, CommunicationSlow, NonCommunicationSlow };

const char* c4_key(C4Class c);   // "communication_hang", ...: the reports' JSON
const char* c4_text(C4Class c);  // "communication hang", ...: log lines and hier-report

// Where one member of the communicator was when the hang was investigated.
enum class Whereabouts {
  InCall,             // waiting in the very call
  Ahead,              // already past it (a rooted collective's root, or a later call)
  InOtherCollective,  // blocked in a collective on another communicator
  InOtherMpiCall,     // in another MPI call (its main thread's stack shows one), not a collective
  OutsideMpi,         // alive, not in MPI: computing, sleeping, blocked in the program
  Stopped,            // its side channel accepts but does not answer (SIGSTOP, a frozen process)
  Gone,               // its side channel refuses: the process exited or was killed
  Unreachable,        // its side channel cannot be reached at all (node or link down)
};

struct C4Evidence {
  std::vector<std::pair<int, Whereabouts>> members;  // world rank, where it was
  bool mismatch = false;          // members called different collectives at this sequence number
  double completed_after_s = -1;  // the call completed after the report, this long after it began; < 0: not (yet)
};

struct C4Verdict {
  C4Class cls = C4Class::CommunicationHang;
  std::string basis;  // the evidence, in words, naming the ranks it rests on
};

// Not completed: a mismatch is a communication hang; else any member outside MPI, stopped or
// gone makes it a non-communication hang (that rank never reaches the call); else (every member
// in the call or past it, or blocked in other communication, or unreachable) a communication
// hang. Completed after the report: the hang's slow counterpart (late arrival: non-communication
// slow; slow inside the collective: communication slow), except with a mismatch or a gone member,
// where only an error return can end the call: then it stays the hang it was.
C4Verdict classify_hang(const C4Evidence& e);

}  // namespace hier::diag
