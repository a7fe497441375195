#include "exec/own_progress.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "config/config.hpp"
#include "exec/request.hpp"
#include "exec/request_engine.hpp"

namespace hier::exec::own_progress {
namespace {

// A tracked handle no completion call was seen to complete stops being poked for after this
// long (a program completing it where libhier does not look, such as MPI_Request_get_status
// loops: a probe every few milliseconds for ever would be a cost without an end).
constexpr double kStale = 30.0;

struct Tracked {
  MPI_Request r;
  double since;
};
std::mutex g_mu;
std::vector<Tracked> g_tracked;
std::atomic<int> g_count{0};    // g_tracked.size(), read without the lock
std::atomic<int> g_waiting{0};  // program threads inside a blocking completion call
std::atomic<long> g_total{0}, g_pokes{0};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void track(MPI_Request r) {
  if (r == MPI_REQUEST_NULL || !config::get().progress_mpi || is_collective_request(r)) return;
  engine::setup_once();  // the progress thread, where the thread level allows it
  if (!engine::g_thread_on.load(std::memory_order_acquire)) return;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    g_tracked.push_back({r, now()});
    g_count.store(static_cast<int>(g_tracked.size()), std::memory_order_release);
  }
  g_total.fetch_add(1, std::memory_order_relaxed);
  engine::wake_thread();
}

bool any() { return g_count.load(std::memory_order_relaxed) > 0; }

void settle(const std::vector<MPI_Request>& before, const MPI_Request* after, int n) {
  std::lock_guard<std::mutex> lk(g_mu);
  for (int i = 0; i < n && i < static_cast<int>(before.size()); ++i) {
    if (before[i] == MPI_REQUEST_NULL || after[i] != MPI_REQUEST_NULL) continue;
    auto it = std::find_if(g_tracked.begin(), g_tracked.end(), [&](const Tracked& t) { return t.r == before[i]; });
    if (it != g_tracked.end()) g_tracked.erase(it);
  }
  g_count.store(static_cast<int>(g_tracked.size()), std::memory_order_release);
}

bool wanted() { return any() && g_waiting.load(std::memory_order_relaxed) == 0; }

void poke() {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    const double t = now();
    g_tracked.erase(std::remove_if(g_tracked.begin(), g_tracked.end(), [&](const Tracked& x) { return t - x.since > kStale; }),
                    g_tracked.end());
    g_count.store(static_cast<int>(g_tracked.size()), std::memory_order_release);
    if (g_tracked.empty()) return;
  }
  // One pass of the MPI's progress engine: a probe takes nothing (a message it finds stays
  // queued for the program's receive). On MPI_COMM_WORLD: MPICH 4.0.2 answers a probe on
  // MPI_COMM_SELF without running its progress engine (measured: a 4-rank MPI_Iallreduce did not
  // advance from a second thread probing there, and did probing MPI_COMM_WORLD).
  int flag = 0;
  (void)PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  g_pokes.fetch_add(1, std::memory_order_relaxed);
}

Waiting::Waiting() { g_waiting.fetch_add(1, std::memory_order_relaxed); }
Waiting::~Waiting() {
  // The thread sleeps while a program thread waits; tracked handles left after the call need it.
  if (g_waiting.fetch_sub(1, std::memory_order_relaxed) == 1 && any()) engine::wake_thread();
}

long tracked_total() { return g_total.load(std::memory_order_relaxed); }
long pokes_total() { return g_pokes.load(std::memory_order_relaxed); }

}  // namespace hier::exec::own_progress
