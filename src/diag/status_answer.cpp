// This rank's answer to another rank's "where are you with communicator `key`?" (served by the
// side channel's thread, side_channel.cpp), and the parse of such an answer: which collective
// this rank is in, or, when in none, what its main thread is doing and where.
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "diag/flight.hpp"
#include "diag/side_channel.hpp"
#include "diag/watch_state.hpp"
#include "diag/where.hpp"
#include "hier/fn.hpp"
#include "util/strings.hpp"

namespace hier::diag {

namespace {

std::string clean(const std::string& s) { return clean_text(s); }

// The flight recorder's fields (recent_sites recent_calls), within what the answer may carry.
std::string flight_fields(uint64_t key, size_t used) {
  constexpr size_t kRoom = channel::kMaxAnswerBytes - 1024;  // the channel's header and MAC
  return '\t' + flight_answer(key, /*resolve=*/true, used < kRoom ? kRoom - used : 0);
}

}  // namespace

// Tab-separated fields:
//  known seq_on_comm sig_at_asked_seq in_call fn call_key call_seq count root elapsed_ms site doing in_mpi
// and, in a full answer, recent_sites recent_calls (flight_compare.hpp's encoding)
// (rank and pid travel in the side channel's own header). `brief`: only whether and where this
// rank is in a collective, without reading its stack or starting addr2line.
std::string status_line(uint64_t key, uint64_t asked_seq, bool brief) {
  CommWatch* w = comm_by_key(key);
  std::ostringstream o;
  o << (w ? 1 : 0) << '\t' << (w ? w->seq.load() : 0) << '\t'
    << (w && asked_seq ? w->sig[asked_seq % CommWatch::kSigRing].load() : 0) << '\t';
  // The call in progress: the asked one if this rank is in it, else the main thread's (else any
  // thread's) blocking collective, else a collective request it waits for.
  std::vector<CallView> calls;
  const int ns = n_call_slots();
  for (int i = 0; i < ns; ++i) {
    const CallView v = read_slot(call_slot(i));
    if (v.active && v.comm) calls.push_back(v);
  }
  for (const PendingCall& p : waiting_requests()) calls.push_back(view_of(p));
  if (!calls.empty()) {
    CallView cv = calls[0];
    for (const CallView& v : calls)
      if (v.comm->key == key && v.seq == asked_seq) cv = v;
    const std::string site = brief || !cv.ra ? "" : where::describe(where::resolve({cv.ra})[0]);
    o << 1 << '\t' << fn_name(cv.fn) << '\t' << cv.comm->key << '\t' << cv.seq << '\t' << cv.count << '\t' << cv.root
      << '\t' << (watch_now_ns() - cv.t0_ns) / 1000000 << '\t' << clean(site) << '\t' << "" << '\t' << 0;
    if (brief) return o.str();
    const std::string head = o.str();
    return head + flight_fields(key, head.size());
  }
  o << 0 << '\t' << "" << '\t' << 0 << '\t' << 0 << '\t' << -1 << '\t' << -1 << '\t' << 0 << '\t';
  if (brief) return o.str() + "\t\t0";
  // Not in a collective: what the main thread is doing, and where in the program.
  // A blocked thread can be caught in a short run (a signal, a restarted sleep): look again.
  const int main_tid = watch_config().main_tid;
  where::ThreadLook t = where::look_at_thread(main_tid);
  for (int i = 0; i < 10 && t.stack.empty(); ++i) {
    usleep(20 * 1000);
    t = where::look_at_thread(main_tid);
  }
  const std::vector<where::Frame> fr = where::resolve(t.stack);
  std::string mpi_call, site;
  for (const where::Frame& f : fr) {
    if (mpi_call.empty() && (f.function.rfind("MPI_", 0) == 0 || f.function.rfind("PMPI_", 0) == 0))
      mpi_call = f.function;
    if (site.empty() && !f.system && !f.file_line.empty()) site = where::describe(f);
  }
  if (site.empty())
    for (const where::Frame& f : fr)
      if (!f.system) {
        site = where::describe(f);
        break;
      }
  std::string doing = mpi_call.empty() ? "not in MPI" : "in " + mpi_call + " (not a collective)";
  doing += ", main thread " + t.state;
  if (!t.syscall.empty()) doing += " in " + t.syscall + "()";
  if (!site.empty()) doing += " at " + site;
  o << clean(site) << '\t' << clean(doing) << '\t' << (mpi_call.empty() ? 0 : 1);
  const std::string head = o.str();
  return head + flight_fields(key, head.size());
}

bool parse_status(const std::string& line, MemberStatus& m) {
  const std::vector<std::string> f = util::split(line, '\t');
  if (f.size() != 13 && f.size() != 15) return false;
  if (f.size() == 15 && !decode_recent(f[13], f[14], m.recent)) return false;
  m.known = f[0] == "1";
  m.seq_on_comm = std::strtoull(f[1].c_str(), nullptr, 10);
  m.sig_at_seq = std::strtoull(f[2].c_str(), nullptr, 10);
  m.in_call = f[3] == "1";
  m.fn = f[4];
  m.call_key = std::strtoull(f[5].c_str(), nullptr, 10);
  m.call_seq = std::strtoull(f[6].c_str(), nullptr, 10);
  m.count = std::atoll(f[7].c_str());
  m.root = std::atoi(f[8].c_str());
  m.elapsed_ms = std::atol(f[9].c_str());
  m.site = f[10];
  m.doing = f[11];
  m.in_mpi = f[12] == "1";
  return true;
}

}  // namespace hier::diag
