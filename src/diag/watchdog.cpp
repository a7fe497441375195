// The hang watchdog thread (HIER_WATCHDOG=seconds): every tick it reads the threads' call slots
// and the waited-for collective requests (never MPI) and starts the investigation of a call past
// the limit on a thread of its own (hang_investigation.cpp). Started at MPI_Init with the side
// channel's server (side_channel.cpp, answering with status_answer.cpp), stopped at finalize.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <set>
#include <string>

#include "diag/log.hpp"
#include "diag/side_channel.hpp"
#include "diag/watch_state.hpp"
#include "util/strings.hpp"

namespace hier::diag {

bool g_watch_on = false;

namespace {

struct Watchdog {
  WatchConfig cfg;
  int stop_pipe[2] = {-1, -1};  // wakes the watchdog thread at finalize
  pthread_t thread{};
  bool thread_started = false;
  std::atomic<bool> investigating{false};
};

Watchdog* g = nullptr;  // never freed: the watchdog thread may outlive finalize at exit

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
  const uint64_t limit_ns = static_cast<uint64_t>(g->cfg.limit_s * 1e9);
  const int tick_ms = std::clamp(static_cast<int>(g->cfg.limit_s * 1000 / 8), 20, 250);
  auto overdue = [&](const CallView& cv, uint64_t t) { return cv.active && cv.comm && cv.t0_ns <= t && t - cv.t0_ns >= limit_ns; };
  auto consider = [&](const CallView& cv, CallId id) {
    if (!handled.insert(id).second) return;
    if (!start_investigation(cv, id)) handled.erase(id);
  };
  for (;;) {
    pollfd p{g->stop_pipe[0], POLLIN, 0};
    if (poll(&p, 1, tick_ms) > 0) break;
    check_open_hangs();
    const uint64_t t = watch_now_ns();
    const int ns = n_call_slots();
    for (int i = 0; i < ns; ++i) {
      CallSlot& s = call_slot(i);
      const CallView cv = read_slot(s);
      // A call that started after `t` was read has t0 > t.
      if (overdue(cv, t)) consider(cv, {reinterpret_cast<uintptr_t>(&s), cv.gen});
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

const WatchConfig& watch_config() { return g->cfg; }

void watch_init(double limit_s, int world_rank, int world_size, const char* report_template) {
  if (limit_s <= 0 || world_size <= 0) return;
  g = new Watchdog();
  g->cfg.limit_s = limit_s;
  g->cfg.rank = world_rank;
  g->cfg.size = world_size;
  g->cfg.main_tid = static_cast<int>(syscall(SYS_gettid));
  if (report_template && *report_template) {
    const std::string path = util::expand_path_template(report_template, world_rank);
    const size_t s = path.rfind('/');
    g->cfg.report_dir = s == std::string::npos ? "." : (s == 0 ? "/" : path.substr(0, s));
  }
  comm_watch_init();
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

}  // namespace hier::diag
