// The investigation of a collective that waited past the limit (on a thread the watchdog starts):
// who asks, the questions to every member over the side channel, the hang report (a pure function
// of the answers, hang_report.cpp), its log lines and file, and its rewrite when the call ends.
#include <algorithm>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "diag/hang_report.hpp"
#include "diag/log.hpp"
#include "diag/side_channel.hpp"
#include "diag/watch_state.hpp"
#include "util/files.hpp"

namespace hier::diag {

namespace {

// A hang this rank reported, watched until its call completes (then the report is rebuilt with
// the completion time, which turns its class into the slow one) or the rank finalizes.
struct OpenHang {
  CallId id;
  uint64_t t0 = 0;
  HangCall call;
  std::vector<MemberStatus> members;
  size_t index = 0;  // into Hangs::texts
  std::string path;  // the hang file ("": none)
};

struct Hangs {
  std::mutex mu;
  std::vector<std::string> texts;  // JSON texts of the reports this rank wrote
  std::vector<OpenHang> open;      // reports whose call had not completed yet
};
// Never freed: an investigation's thread may outlive finalize at exit.
Hangs& hangs() {
  static Hangs* h = new Hangs();
  return *h;
}

MemberStatus query(int world, uint64_t key, uint64_t seq, bool brief) {
  MemberStatus m;
  m.world = world;
  m.host = clean_text(channel::host_of(world), 64);
  m.pid = channel::pid_of(world);
  const int me = watch_config().rank;
  if (world == me) {
    parse_status(status_line(key, seq, brief), m);
    return m;
  }
  channel::Query q;
  q.from = me;
  q.key = key;
  q.seq = seq;
  q.brief = brief;
  std::string body;
  switch (channel::ask(world, q, body)) {
    case channel::Reach::Ok:
      if (!parse_status(body, m)) m.reach = MemberStatus::Unreachable;
      break;
    case channel::Reach::Gone: m.reach = MemberStatus::Gone; break;
    case channel::Reach::NoAnswer: m.reach = MemberStatus::NoAnswer; break;
    case channel::Reach::Unreachable: m.reach = MemberStatus::Unreachable; break;
  }
  return m;
}

// Asks the members at `idx` (indices into the communicator) at once, 32 threads at a time: a
// stopped member costs the answer timeout once, not once per member.
std::vector<MemberStatus> query_all(const CommWatch& w, const std::vector<int>& idx, uint64_t key, uint64_t seq,
                                    bool brief) {
  std::vector<MemberStatus> ms(idx.size());
  constexpr size_t kBatch = 32;
  for (size_t b = 0; b < ms.size(); b += kBatch) {
    // No exception may leave a thread (std::terminate), nor a joinable thread be destroyed.
    auto ask = [&](size_t i) noexcept {
      try {
        ms[i] = query(w.world[static_cast<size_t>(idx[i])], key, seq, brief);
      } catch (...) {
        ms[i].world = w.world[static_cast<size_t>(idx[i])];
        ms[i].reach = MemberStatus::Unreachable;
      }
    };
    std::vector<std::thread> ts;
    ts.reserve(kBatch);
    for (size_t i = b; i < std::min(ms.size(), b + kBatch); ++i) {
      try {
        ts.emplace_back(ask, i);
      } catch (...) {  // no thread to spare: asked from here
        ask(i);
      }
    }
    for (std::thread& t : ts) t.join();
  }
  return ms;
}

void write_hang_file(const std::string& path, const std::string& json) {
  std::string err;
  if (!path.empty() && !util::write_file_replacing(path, json + "\n", err))
    HIER_WARN("watchdog", "cannot write the hang report '%s' (%s)", path.c_str(), err.c_str());
}

// Whether the call `id` still runs: its slot still shows that generation active, or its request
// is still waited for.
bool still_running(CallId id) {
  if (id.first) {
    const CallView v = read_slot(*reinterpret_cast<CallSlot*>(id.first));
    return v.active && v.gen == id.second;
  }
  for (const PendingCall& p : waiting_requests())
    if (p.id == id.second) return true;
  return false;
}

}  // namespace

// A collective of this rank has waited past the limit. Only the lowest member waiting in the same
// call asks everyone and writes the report (pick_investigator: a few brief questions to lower
// members decide it); the others stay quiet. The report stays open until its call completes.
void investigate(const CallView& cv, CallId id) {
  const WatchConfig& cfg = watch_config();
  CommWatch* w = cv.comm;
  const uint64_t key = w->key, seq = cv.seq;
  int me = -1;
  for (size_t i = 0; i < w->world.size(); ++i)
    if (w->world[i] == cfg.rank) me = static_cast<int>(i);
  if (me < 0) return;
  const int who = pick_investigator(me, [&](const std::vector<int>& idx) {
    std::vector<bool> r;
    for (const MemberStatus& m : query_all(*w, idx, key, seq, /*brief=*/true)) r.push_back(waiting_in(m, key, seq));
    return r;
  });
  if (who != me) return;
  std::vector<int> all(w->world.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  const std::vector<MemberStatus> ms = query_all(*w, all, key, seq, /*brief=*/false);
  // Still waiting by its own answer (the call may have completed meanwhile: then no report).
  if (!waiting_in(ms[static_cast<size_t>(me)], key, seq)) return;
  HangCall call;
  call.reporter = cfg.rank;
  call.limit_s = cfg.limit_s;
  call.waited_s = static_cast<double>(watch_now_ns() - cv.t0_ns) / 1e9;
  call.fn = cv.fn;
  call.seq = seq;
  call.key = key;
  call.count = cv.count;
  call.root = cv.root;
  call.world = w->world;
  const HangReport rep = build_hang_report(call, ms);
  for (const std::string& l : rep.lines) log::write(config::LogLevel::Warn, "watchdog", __FILE__, __LINE__, "%s", l.c_str());
  const std::string path = cfg.report_dir.empty() ? ""
      : cfg.report_dir + "/hier-hang-" + std::to_string(cfg.rank) + "-" + std::to_string(seq) + ".json";
  {
    Hangs& hs = hangs();
    std::lock_guard<std::mutex> lk(hs.mu);
    hs.texts.push_back(rep.json);
    // Written under the lock: a completion seen meanwhile by the watchdog thread rewrites it after.
    write_hang_file(path, rep.json);
    hs.open.push_back({id, cv.t0_ns, std::move(call), ms, hs.texts.size() - 1, path});
  }
}

// The reported calls that completed since the last tick: each report is rebuilt with the time the
// call took (known to within a tick), logged in one line and written again.
void check_open_hangs() {
  Hangs& hs = hangs();
  std::lock_guard<std::mutex> lk(hs.mu);
  for (size_t i = 0; i < hs.open.size();) {
    OpenHang& h = hs.open[i];
    if (still_running(h.id)) {
      ++i;
      continue;
    }
    const double took = static_cast<double>(watch_now_ns() - h.t0) / 1e9;
    const HangReport rep = build_hang_report(h.call, h.members, took);
    log::write(config::LogLevel::Warn, "watchdog", __FILE__, __LINE__, "%s", rep.completed_line.c_str());
    hs.texts[h.index] = rep.json;
    write_hang_file(h.path, rep.json);
    hs.open.erase(hs.open.begin() + static_cast<long>(i));
  }
}

std::string hangs_json() {
  std::string s = "[";
  Hangs& hs = hangs();
  std::lock_guard<std::mutex> lk(hs.mu);
  for (size_t i = 0; i < hs.texts.size(); ++i) s += (i ? "," : "") + hs.texts[i];
  return s + "]";
}

}  // namespace hier::diag
