// Hang watchdog: per-communicator sequence numbers (application threads), the watchdog thread
// (slot reads, side-channel questions, /proc reads; never MPI), this rank's answers. The socket
// protocol is side_channel.cpp, the report a pure function of the answers (hang_report.cpp).
#include "diag/watch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "diag/hang_report.hpp"
#include "diag/log.hpp"
#include "diag/side_channel.hpp"
#include "diag/watch_state.hpp"
#include "diag/where.hpp"
#include "hier/fn.hpp"
#include "util/files.hpp"
#include "util/strings.hpp"

namespace hier::diag {

bool g_watch_on = false;

namespace {

constexpr int kMaxSlots = 64;
constexpr int kMaxComms = 4096;

// The watchdog's name for one call: (slot address, generation) for a blocking call, (0, start id)
// for a collective request.
using CallId = std::pair<uintptr_t, uint64_t>;

// A hang this rank reported, watched until its call completes (then the report is rebuilt with
// the completion time, which turns its class into the slow one) or the rank finalizes.
struct OpenHang {
  CallId id;
  uint64_t t0 = 0;
  HangCall call;
  std::vector<MemberStatus> members;
  size_t index = 0;  // into State::hangs
  std::string path;  // the hang file ("": none)
};

struct State {
  double limit_s = 0;
  int rank = -1, size = 0;
  int main_tid = 0;
  std::string report_dir;  // "" = no file
  int keyval = MPI_KEYVAL_INVALID;
  std::mutex mu;  // creation of CommWatch and slots
  CommWatch* comms[kMaxComms] = {};
  std::atomic<int> n_comms{0};
  std::map<uint64_t, int> ordinal;  // members hash -> how many communicators seen with it
  CallSlot slots[kMaxSlots];
  std::atomic<int> n_slots{0};
  std::atomic<uint64_t> epoch{1};  // bumped when a watched communicator is freed
  int stop_pipe[2] = {-1, -1};  // wakes the watchdog thread at finalize
  pthread_t thread{};
  bool thread_started = false;
  std::atomic<bool> investigating{false};
  std::mutex hangs_mu;
  std::vector<std::string> hangs;  // JSON texts of the reports this rank wrote
  std::vector<OpenHang> open_hangs;  // reports whose call had not completed yet
};

State* g = nullptr;  // never freed: the watchdog thread may outlive finalize at exit

thread_local CallSlot* tl_slot __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local MPI_Comm tl_last_comm __attribute__((tls_model("initial-exec"))) = MPI_COMM_NULL;
thread_local CommWatch* tl_last_watch __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local uint64_t tl_last_epoch __attribute__((tls_model("initial-exec"))) = 0;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // the clock of the slots' t0 (DiagScope)
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t fnv(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

int delete_attr(MPI_Comm, int, void* val, void*) {
  auto* w = static_cast<CommWatch*>(val);
  if (w) w->freed.store(true);
  if (g) g->epoch.fetch_add(1);
  return MPI_SUCCESS;
}

CommWatch* create_watch(MPI_Comm comm) {
  auto* w = new CommWatch();
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (!inter) {
    MPI_Group grp, wgrp;
    PMPI_Comm_group(comm, &grp);
    PMPI_Comm_group(MPI_COMM_WORLD, &wgrp);
    PMPI_Group_size(grp, &w->size);
    std::vector<int> ranks(static_cast<size_t>(w->size));
    for (int i = 0; i < w->size; ++i) ranks[static_cast<size_t>(i)] = i;
    w->world.assign(static_cast<size_t>(w->size), MPI_UNDEFINED);
    PMPI_Group_translate_ranks(grp, w->size, ranks.data(), wgrp, w->world.data());
    PMPI_Group_free(&grp);
    PMPI_Group_free(&wgrp);
    const uint64_t h = fnv(w->world.data(), w->world.size() * sizeof(int));
    std::lock_guard<std::mutex> lk(g->mu);
    const int ord = g->ordinal[h]++;
    w->key = fnv(&ord, sizeof ord, h) | 1;
    const int n = g->n_comms.load();
    if (n < kMaxComms) {
      g->comms[n] = w;
      g->n_comms.store(n + 1, std::memory_order_release);
    }
  }
  PMPI_Comm_set_attr(comm, g->keyval, w);
  return w;
}

CommWatch* watch_of(MPI_Comm comm) {
  const uint64_t ep = g->epoch.load(std::memory_order_relaxed);
  if (comm == tl_last_comm && ep == tl_last_epoch) return tl_last_watch;
  void* v = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, g->keyval, &v, &found);
  CommWatch* w = found ? static_cast<CommWatch*>(v) : create_watch(comm);
  tl_last_comm = comm;
  tl_last_watch = w;
  tl_last_epoch = ep;
  return w;
}

int base_fn(int fn) { return static_cast<int>(base_of(static_cast<Fn>(fn))); }

}  // namespace

CallSlot* this_thread_slot() {
  if (tl_slot) return tl_slot;
  std::lock_guard<std::mutex> lk(g->mu);
  const int n = g->n_slots.load();
  if (n >= kMaxSlots) return nullptr;
  tl_slot = &g->slots[n];
  g->n_slots.store(n + 1, std::memory_order_release);
  return tl_slot;
}

CommWatch* watch_comm(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return nullptr;
  CommWatch* w = watch_of(comm);
  return w && w->key ? w : nullptr;
}

uint64_t watch_next_seq(CommWatch* w, int fn, int64_t count, int root) {
  const uint64_t seq = w->seq.load(std::memory_order_relaxed) + 1;
  w->seq.store(seq, std::memory_order_relaxed);
  w->sig[seq % CommWatch::kSigRing].store(call_signature(base_fn(fn), count, root), std::memory_order_relaxed);
  return seq;
}

uint64_t watch_now_ns() { return now_ns(); }

void watch_begin(CallSlot* s, int fn, MPI_Comm comm, int64_t count, int root, const void* ra, uint64_t t0_ns) {
  CommWatch* w = watch_comm(comm);
  if (!w) return;
  const uint64_t seq = watch_next_seq(w, fn, count, root);
  const uint64_t g0 = s->gen.load(std::memory_order_relaxed);
  s->gen.store(g0 + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->call = WatchedCall{w, seq, fn, root, count, ra, t0_ns};
  s->gen.store(g0 + 2, std::memory_order_release);
  s->active.store(1, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------------
// The watchdog thread (slots past the limit), the answers this rank gives on the side channel
// (side_channel.cpp serves them on a thread of its own) and the investigation of a hang.
namespace {

struct CallView : WatchedCall {
  bool active = false;
  uint64_t gen = 0;
};

CallView read_slot(CallSlot& s) {
  CallView v;
  for (int tries = 0; tries < 100; ++tries) {
    const uint64_t a = s.gen.load(std::memory_order_acquire);
    if (a & 1) continue;
    v.active = s.active.load(std::memory_order_acquire) != 0;
    static_cast<WatchedCall&>(v) = s.call;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.gen.load(std::memory_order_relaxed) == a) {
      v.gen = a;
      return v;
    }
  }
  v.active = false;
  return v;
}

// A collective request waited for, seen as the blocking call it stands for.
CallView view_of(const PendingCall& p) {
  CallView v;
  v.active = true;
  v.gen = p.id;
  static_cast<WatchedCall&>(v) = p;
  return v;
}

CommWatch* comm_by_key(uint64_t key) {
  const int n = g->n_comms.load(std::memory_order_acquire);
  for (int i = n - 1; i >= 0; --i)
    if (g->comms[i]->key == key) return g->comms[i];
  return nullptr;
}

std::string clean(const std::string& s) { return clean_text(s); }

// This rank's answer to "where are you with communicator `key`?": tab-separated fields.
//  known seq_on_comm sig_at_asked_seq in_call fn call_key call_seq count root elapsed_ms site doing in_mpi
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
  const int ns = g->n_slots.load(std::memory_order_acquire);
  for (int i = 0; i < ns; ++i) {
    const CallView v = read_slot(g->slots[i]);
    if (v.active && v.comm) calls.push_back(v);
  }
  for (const PendingCall& p : waiting_requests()) calls.push_back(view_of(p));
  if (!calls.empty()) {
    CallView cv = calls[0];
    for (const CallView& v : calls)
      if (v.comm->key == key && v.seq == asked_seq) cv = v;
    const std::string site = brief || !cv.ra ? "" : where::describe(where::resolve({cv.ra})[0]);
    o << 1 << '\t' << fn_name(cv.fn) << '\t' << cv.comm->key << '\t' << cv.seq << '\t' << cv.count << '\t' << cv.root
      << '\t' << (now_ns() - cv.t0_ns) / 1000000 << '\t' << clean(site) << '\t' << "" << '\t' << 0;
    return o.str();
  }
  o << 0 << '\t' << "" << '\t' << 0 << '\t' << 0 << '\t' << -1 << '\t' << -1 << '\t' << 0 << '\t';
  if (brief) return o.str() + "\t\t0";
  // Not in a collective: what the main thread is doing, and where in the program.
  // A blocked thread can be caught in a short run (a signal, a restarted sleep): look again.
  where::ThreadLook t = where::look_at_thread(g->main_tid);
  for (int i = 0; i < 10 && t.stack.empty(); ++i) {
    usleep(20 * 1000);
    t = where::look_at_thread(g->main_tid);
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
  return o.str();
}

bool parse_status(const std::string& line, MemberStatus& m) {
  const std::vector<std::string> f = util::split(line, '\t');
  if (f.size() != 13) return false;
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

MemberStatus query(int world, uint64_t key, uint64_t seq, bool brief) {
  MemberStatus m;
  m.world = world;
  m.host = clean_text(channel::host_of(world), 64);
  m.pid = channel::pid_of(world);
  if (world == g->rank) {
    parse_status(status_line(key, seq, brief), m);
    return m;
  }
  channel::Query q;
  q.from = g->rank;
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

// A collective of this rank has waited past the limit. Only the lowest member waiting in the same
// call asks everyone and writes the report (pick_investigator: a few brief questions to lower
// members decide it); the others stay quiet. The report stays open until its call completes.
void investigate(const CallView& cv, CallId id) {
  CommWatch* w = cv.comm;
  const uint64_t key = w->key, seq = cv.seq;
  int me = -1;
  for (size_t i = 0; i < w->world.size(); ++i)
    if (w->world[i] == g->rank) me = static_cast<int>(i);
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
  call.reporter = g->rank;
  call.limit_s = g->limit_s;
  call.waited_s = static_cast<double>(now_ns() - cv.t0_ns) / 1e9;
  call.fn = cv.fn;
  call.seq = seq;
  call.key = key;
  call.count = cv.count;
  call.root = cv.root;
  call.world = w->world;
  const HangReport rep = build_hang_report(call, ms);
  for (const std::string& l : rep.lines) log::write(config::LogLevel::Warn, "watchdog", __FILE__, __LINE__, "%s", l.c_str());
  const std::string path = g->report_dir.empty() ? ""
      : g->report_dir + "/hier-hang-" + std::to_string(g->rank) + "-" + std::to_string(seq) + ".json";
  {
    std::lock_guard<std::mutex> lk(g->hangs_mu);
    g->hangs.push_back(rep.json);
    // Written under the lock: a completion seen meanwhile by the watchdog thread rewrites it after.
    write_hang_file(path, rep.json);
    g->open_hangs.push_back({id, cv.t0_ns, std::move(call), ms, g->hangs.size() - 1, path});
  }
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

// The reported calls that completed since the last tick: each report is rebuilt with the time the
// call took (known to within a tick), logged in one line and written again.
void check_open_hangs() {
  std::lock_guard<std::mutex> lk(g->hangs_mu);
  for (size_t i = 0; i < g->open_hangs.size();) {
    OpenHang& h = g->open_hangs[i];
    if (still_running(h.id)) {
      ++i;
      continue;
    }
    const double took = static_cast<double>(now_ns() - h.t0) / 1e9;
    const HangReport rep = build_hang_report(h.call, h.members, took);
    log::write(config::LogLevel::Warn, "watchdog", __FILE__, __LINE__, "%s", rep.completed_line.c_str());
    g->hangs[h.index] = rep.json;
    write_hang_file(h.path, rep.json);
    g->open_hangs.erase(g->open_hangs.begin() + static_cast<long>(i));
  }
}

struct Investigation {
  CallView cv;
  CallId id;
};

void* investigate_main(void* p) {
  auto* inv = static_cast<Investigation*>(p);
  try {
    investigate(inv->cv, inv->id);
  } catch (const std::exception& e) {  // never std::terminate in someone else's job
    HIER_WARN("watchdog", "hang investigation failed: %s", e.what());
  } catch (...) {
    HIER_WARN("watchdog", "hang investigation failed");
  }
  delete inv;
  g->investigating.store(false);
  return nullptr;
}

// Starts the investigation of `cv` on a thread of its own (the watchdog keeps watching). false:
// one is still running (try again at the next tick).
bool start_investigation(const CallView& cv, CallId id) {
  if (g->investigating.exchange(true)) return false;
  auto* arg = new Investigation{cv, id};
  pthread_t th;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &at, investigate_main, arg) != 0) {
    delete arg;
    g->investigating.store(false);
  }
  pthread_attr_destroy(&at);
  return true;
}

void watch_loop() {
  std::set<CallId> handled;  // calls already investigated
  const uint64_t limit_ns = static_cast<uint64_t>(g->limit_s * 1e9);
  const int tick_ms = std::clamp(static_cast<int>(g->limit_s * 1000 / 8), 20, 250);
  auto overdue = [&](const CallView& cv, uint64_t t) { return cv.active && cv.comm && cv.t0_ns <= t && t - cv.t0_ns >= limit_ns; };
  auto consider = [&](const CallView& cv, CallId id) {
    if (!handled.insert(id).second) return;
    if (!start_investigation(cv, id)) handled.erase(id);
  };
  for (;;) {
    pollfd p{g->stop_pipe[0], POLLIN, 0};
    if (poll(&p, 1, tick_ms) > 0) break;
    check_open_hangs();
    const uint64_t t = now_ns();
    const int ns = g->n_slots.load(std::memory_order_acquire);
    for (int i = 0; i < ns; ++i) {
      const CallView cv = read_slot(g->slots[i]);
      // A call that started after `t` was read has t0 > t.
      if (overdue(cv, t)) consider(cv, {reinterpret_cast<uintptr_t>(&g->slots[i]), cv.gen});
    }
    for (const PendingCall& pc : waiting_requests()) {
      const CallView cv = view_of(pc);
      if (overdue(cv, t)) consider(cv, {0, pc.id});
    }
  }
}

void* thread_main(void*) {
  try {
    watch_loop();
  } catch (...) {
    HIER_WARN("watchdog", "the watchdog stopped on an internal error");
  }
  return nullptr;
}

}  // namespace

void watch_init(double limit_s, int world_rank, int world_size, const char* report_template) {
  if (limit_s <= 0 || world_size <= 0) return;
  g = new State();
  g->limit_s = limit_s;
  g->rank = world_rank;
  g->size = world_size;
  g->main_tid = static_cast<int>(syscall(SYS_gettid));
  if (report_template && *report_template) {
    const std::string path = util::expand_path_template(report_template, world_rank);
    const size_t s = path.rfind('/');
    g->report_dir = s == std::string::npos ? "." : (s == 0 ? "/" : path.substr(0, s));
  }
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_attr, &g->keyval, nullptr);
  // Every rank takes part in the channel's allgather, also when its sockets fail.
  std::string err;
  const bool ok = channel::open(world_rank, world_size, err);
  if (!ok || pipe2(g->stop_pipe, O_CLOEXEC) != 0) {
    HIER_WARN("watchdog", "HIER_WATCHDOG: no side channel (%s); the watchdog is off on this rank",
              ok ? std::strerror(errno) : err.c_str());
    return;
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);  // the threads start with every signal blocked
  const bool served = channel::start_server([](const channel::Query& q) { return status_line(q.key, q.seq, q.brief); });
  g->thread_started = served && pthread_create(&g->thread, nullptr, thread_main, nullptr) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!g->thread_started) {
    channel::stop();
    return;
  }
  g_watch_on = true;
  HIER_INFO("watchdog", "HIER_WATCHDOG=%g: side channel on %s", limit_s, channel::addresses().c_str());
}

void watch_finalize() {
  if (!g || !g->thread_started) return;
  g_watch_on = false;
  const char c = 'x';
  if (write(g->stop_pipe[1], &c, 1) == 1) pthread_join(g->thread, nullptr);
  g->thread_started = false;
  // A reported call that completed since the last tick (a program that finalizes soon after it).
  try {
    check_open_hangs();
  } catch (...) {
  }
  channel::stop();
}

std::string hangs_json() {
  std::string s = "[";
  if (!g) return s + "]";
  std::lock_guard<std::mutex> lk(g->hangs_mu);
  for (size_t i = 0; i < g->hangs.size(); ++i) s += (i ? "," : "") + g->hangs[i];
  return s + "]";
}

}  // namespace hier::diag
