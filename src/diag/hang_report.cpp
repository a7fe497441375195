#include "diag/hang_report.hpp"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "diag/c4_class.hpp"
#include "diag/ranks_text.hpp"
#include "hier/fn.hpp"

namespace hier::diag {

namespace {

std::string sig_text(const std::string& fn, long long count, int root) {
  std::string s = fn + "(count " + std::to_string(count);
  if (root >= 0) s += ", root " + std::to_string(root);
  return s + ")";
}

// The flight recorder's part: every answering member's recent calls (JSON) and where their calls
// on this communicator first part (JSON and log lines; the members named there, their last calls).
void add_flight(const HangCall& call, const std::vector<MemberStatus>& ms, nlohmann::json& j,
                std::vector<std::string>& lines) {
  using nlohmann::json;
  json jr = json::array();
  for (const MemberStatus& m : ms) {
    if (m.reach != MemberStatus::Ok || m.recent.empty()) continue;
    json calls = json::array();
    for (const RecentCall& c : m.recent) {
      json e = {{"call", clean_text(c.call, 64)}, {"sequence", c.seq}, {"communicator", c.comm}, {"state", recent_state_name(c.state)}};
      if (c.count >= 0) e["count"] = c.count;
      if (c.root >= 0) e["root"] = c.root;
      if (c.state == 'C') e["bytes"] = c.bytes;
      if (!c.site.empty()) e["call_site"] = clean_text(c.site);
      calls.push_back(e);
    }
    jr.push_back({{"rank", m.world}, {"calls", calls}});
  }
  if (jr.empty()) return;
  j["recent_calls"] = jr;
  const Divergence d = find_divergence(ms, call.key, call.seq);
  if (d.kind == Divergence::None) return;
  static const char* kKinds[] = {"none", "different_calls", "different_call_sites", "never_entered"};
  json jd = {{"kind", kKinds[d.kind]}, {"sequence", d.seq}};
  json jg = json::array(), jn = json::array();
  std::string line = "  flight recorder: ";
  if (d.kind == Divergence::NeverEntered) {
    line += "first call not entered by every rank: #" + std::to_string(d.seq) + " " + d.groups[0].call +
            (d.groups[0].site.empty() ? "" : " at " + d.groups[0].site) + " (entered by ranks " +
            ranks_text(d.groups[0].ranks) + ")";
  } else {
    line += std::string("the ranks first disagree at #") + std::to_string(d.seq) +
            (d.kind == Divergence::DifferentSites ? " (same call, other call sites):" : ":");
    for (const Divergence::Group& g : d.groups)
      line += " rank" + std::string(g.ranks.size() > 1 ? "s " : " ") + ranks_text(g.ranks) + " called " + g.call +
              (g.site.empty() ? "" : " at " + g.site) + ";";
  }
  for (const Divergence::Group& g : d.groups) {
    json e = {{"call", g.call}, {"ranks", g.ranks}};
    if (!g.site.empty()) e["call_site"] = g.site;
    jg.push_back(e);
  }
  lines.push_back(line);
  for (const Divergence::Note& n : d.notes) {
    jn.push_back({{"rank", n.rank}, {"what", n.what}});
    lines.push_back("  flight recorder: rank " + std::to_string(n.rank) + " " + n.what);
  }
  jd["calls"] = jg;
  jd["ranks"] = jn;
  j["divergence"] = jd;
}

}  // namespace

uint64_t call_signature(int base_fn, int64_t count, int root) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(base_fn)) << 48) ^
         (static_cast<uint64_t>(static_cast<uint16_t>(root + 1)) << 32) ^ static_cast<uint64_t>(count & 0xffffffff);
}

bool waiting_in(const MemberStatus& m, uint64_t key, uint64_t seq) {
  return m.reach == MemberStatus::Ok && m.in_call && m.call_key == key && m.call_seq == seq;
}

std::string clean_text(const std::string& s, size_t max_len) {
  std::string o = s.substr(0, max_len);
  for (char& c : o)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return o;
}

int pick_investigator(int me, const std::function<std::vector<bool>(const std::vector<int>&)>& waiting_at) {
  int next = 0;
  for (int batch = 1; next < me; batch *= 2) {
    std::vector<int> ask;
    for (int i = next; i < me && static_cast<int>(ask.size()) < batch; ++i) ask.push_back(i);
    next += static_cast<int>(ask.size());
    const std::vector<bool> w = waiting_at(ask);
    for (size_t k = 0; k < ask.size() && k < w.size(); ++k)
      if (w[k]) return ask[k];
  }
  return me;
}

HangReport build_hang_report(const HangCall& call, const std::vector<MemberStatus>& ms, double completed_after_s) {
  using nlohmann::json;
  const uint64_t key = call.key, seq = call.seq;
  const int size = static_cast<int>(call.world.size());
  HangReport out;
  json j;
  j["format"] = "libhier-hang/1";
  j["reported_by"] = call.reporter;
  j["limit_s"] = call.limit_s;
  j["waited_s"] = call.waited_s;
  j["collective"] = fn_name(call.fn);
  j["sequence"] = seq;
  j["communicator"] = {{"size", size}, {"world_ranks", call.world}, {"key", key}};
  json jw = json::array(), jm = json::array();
  std::map<std::string, std::vector<int>> sigs;  // signature text -> ranks (mismatch check)
  const uint64_t my_sig = call_signature(static_cast<int>(base_of(static_cast<Fn>(call.fn))), call.count, call.root);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "HANG: %s #%llu on a communicator of %d ranks (world ranks %s) has waited %.1f s (HIER_WATCHDOG=%g)",
                fn_name(call.fn), static_cast<unsigned long long>(seq), size, ranks_text(call.world).c_str(),
                call.waited_s, call.limit_s);
  out.lines.push_back(buf);
  std::string wl;
  int n_waiting = 0;
  C4Evidence ev;  // where each member was, for the class
  for (const MemberStatus& m : ms) {
    const std::string host = clean_text(m.host, 64), fn = clean_text(m.fn, 64), site = clean_text(m.site),
                      doing = clean_text(m.doing);
    if (waiting_in(m, key, seq)) {
      ++n_waiting;
      ev.members.emplace_back(m.world, Whereabouts::InCall);
      sigs[sig_text(fn, m.count, m.root)].push_back(m.world);
      jw.push_back({{"rank", m.world}, {"host", host}, {"pid", m.pid}, {"call", fn}, {"count", m.count},
                    {"root", m.root}, {"call_site", site}, {"waited_ms", m.elapsed_ms}});
      wl += "rank " + std::to_string(m.world) + " at " + site + "; ";
      continue;
    }
    json e = {{"rank", m.world}, {"host", host}, {"pid", m.pid}};
    std::string what;
    switch (m.reach) {
      case MemberStatus::Gone:
        what = "gone (its side channel is closed: the process exited or was killed)";
        e["state"] = "gone";
        ev.members.emplace_back(m.world, Whereabouts::Gone);
        break;
      case MemberStatus::NoAnswer:
        what = "not responding (stopped?): its side channel accepts but does not answer";
        e["state"] = "not_responding";
        ev.members.emplace_back(m.world, Whereabouts::Stopped);
        break;
      case MemberStatus::Unreachable:
        what = "not responding (stopped?): its side channel cannot be reached (node down?)";
        e["state"] = "not_responding";
        ev.members.emplace_back(m.world, Whereabouts::Unreachable);
        break;
      case MemberStatus::Ok: {
        const uint64_t done = m.seq_on_comm;
        if (m.in_call && m.call_key == key && m.call_seq > seq) {
          what = "already past this call, in " + fn + " #" + std::to_string(m.call_seq) + " at " + site;
          e["state"] = "ahead";
          ev.members.emplace_back(m.world, Whereabouts::Ahead);
        } else if (done >= seq) {
          what = "already left this call (it started " + std::to_string(done) + " collectives on this communicator)";
          e["state"] = "ahead";
          ev.members.emplace_back(m.world, Whereabouts::Ahead);
        } else if (m.in_call) {
          what = "in " + fn + " on another communicator at " + site + " (" + std::to_string(m.elapsed_ms) + " ms)";
          e["state"] = "in_other_collective";
          ev.members.emplace_back(m.world, Whereabouts::InOtherCollective);
          e["call"] = fn;
          e["call_site"] = site;
        } else {
          what = doing;
          e["state"] = "not_arrived";
          ev.members.emplace_back(m.world, m.in_mpi ? Whereabouts::InOtherMpiCall : Whereabouts::OutsideMpi);
          e["doing"] = doing;
          if (!site.empty()) e["call_site"] = site;
        }
        if (done < seq)
          what += "; it has started " + std::to_string(done) + " of " + std::to_string(seq) +
                  " collectives on this communicator";
        e["collectives_started"] = done;
        // A rank past this call ran a collective of its own at this sequence number.
        if (done >= seq && m.sig_at_seq != 0 && m.sig_at_seq != my_sig) {
          const int f = static_cast<int>(m.sig_at_seq >> 48);
          const int root = static_cast<int>((m.sig_at_seq >> 32) & 0xffff) - 1;
          const long long cnt = static_cast<long long>(m.sig_at_seq & 0xffffffff);
          sigs[sig_text(fn_name(f), cnt, root)].push_back(m.world);
        }
        break;
      }
    }
    e["what"] = what;
    jm.push_back(e);
    std::snprintf(buf, sizeof buf, "  missing rank %d (%s pid %ld): ", m.world, host.c_str(), m.pid);
    out.lines.push_back(buf + what);
  }
  out.lines.insert(out.lines.begin() + 1, "  waiting (" + std::to_string(n_waiting) + "): " + wl);
  j["waiting"] = jw;
  j["missing"] = jm;
  if (sigs.size() > 1) {
    std::string mm = "  MISMATCH at this sequence number:";
    json jmm = json::array();
    for (auto& [s, r] : sigs) {
      mm += " ranks " + ranks_text(r) + " called " + s + ";";
      jmm.push_back({{"call", s}, {"ranks", r}});
    }
    out.lines.push_back(mm);
    j["mismatch"] = jmm;
  }
  add_flight(call, ms, j, out.lines);
  ev.mismatch = sigs.size() > 1;
  const C4Verdict at_report = classify_hang(ev);
  out.lines.push_back(std::string("  class: ") + c4_text(at_report.cls) + ": " + at_report.basis);
  j["class"] = c4_key(at_report.cls);
  j["class_basis"] = at_report.basis;
  if (completed_after_s >= 0) {
    ev.completed_after_s = completed_after_s;
    const C4Verdict now = classify_hang(ev);
    j["reported_class"] = j["class"];
    j["class"] = c4_key(now.cls);
    j["class_basis"] = now.basis;
    j["completed_after_s"] = completed_after_s;
    std::snprintf(buf, sizeof buf, "ENDED: %s #%llu, reported above as a %s, is %s classed %s: ", fn_name(call.fn),
                  static_cast<unsigned long long>(seq), c4_text(at_report.cls),
                  now.cls == at_report.cls ? "still" : "now", c4_text(now.cls));
    out.completed_line = buf + now.basis;
  }
  out.json = j.dump(2, ' ', false, json::error_handler_t::replace);
  return out;
}

}  // namespace hier::diag
