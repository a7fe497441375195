// The watchdog's view of nonblocking and persistent collectives (watch.hpp, RequestScope): which
// collective each outstanding request runs (communicator, sequence number, signature) and since
// when its rank waits for it. A short list under a mutex: touched only with the watchdog on, by
// the calls that start, wait for, test or free requests, and by the watchdog thread each tick.
#include <algorithm>
#include <mutex>

#include "diag/watch.hpp"
#include "diag/watch_state.hpp"
#include "hier/fn.hpp"

namespace hier::diag {

namespace {

struct Pending {
  MPI_Request handle = MPI_REQUEST_NULL;
  CommWatch* comm = nullptr;
  uint64_t seq = 0;  // 0: a persistent collective not started
  int fn = 0, root = -1;
  int64_t count = -1;
  const void* wait_ra = nullptr;
  uint64_t first_wait_ns = 0;  // 0: nobody waits for it yet
  bool persistent = false;
  uint64_t id = 0;
};

// More outstanding collective requests than this are not watched (the list is searched linearly).
constexpr size_t kMaxPending = 1024;

std::mutex g_mu;
std::vector<Pending> g_pending;
uint64_t g_next_id = 1;

Pending* find(MPI_Request h) {
  if (h == MPI_REQUEST_NULL) return nullptr;
  for (Pending& p : g_pending)
    if (p.handle == h) return &p;
  return nullptr;
}

void start(Pending& p) {
  p.seq = watch_next_seq(p.comm, p.fn, p.count, p.root);
  p.first_wait_ns = 0;
  p.wait_ra = nullptr;
  p.id = g_next_id++;
}

}  // namespace

void watch_request_started(int fn, MPI_Comm comm, int64_t count, int root, const MPI_Request* req, const void* ra,
                           bool persistent) {
  (void)ra;  // the report names where the rank waits (the MPI_Wait / MPI_Test site)
  if (!req || *req == MPI_REQUEST_NULL) return;
  CommWatch* w = watch_comm(comm);
  if (!w) return;
  std::lock_guard<std::mutex> lk(g_mu);
  Pending* p = find(*req);  // a handle the MPI reuses after an untracked completion
  if (!p) {
    if (g_pending.size() >= kMaxPending) return;
    g_pending.emplace_back();
    p = &g_pending.back();
  }
  *p = Pending{};
  p->handle = *req;
  p->comm = w;
  p->fn = fn;
  p->count = count;
  p->root = root;
  p->persistent = persistent;
  if (!persistent) start(*p);  // MPI orders nonblocking collectives with the blocking ones
}

void RequestScope::begin(int fn, int n, MPI_Request* r, const void* ra) noexcept {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_pending.empty() || !r) return;
  const Fn b = base_of(static_cast<Fn>(fn));
  const bool starts = b == Fn::Start || b == Fn::Startall;
  try {
    for (int i = 0; i < n; ++i) {
      Pending* p = find(r[i]);
      if (!p) continue;
      if (starts) {
        if (p->persistent) start(*p);
        continue;
      }
      if (p->seq && !p->first_wait_ns && b != Fn::Request_free && b != Fn::Cancel) {
        p->first_wait_ns = watch_now_ns();
        p->wait_ra = ra;
      }
      watched_.push_back({i, r[i]});
    }
  } catch (...) {  // out of memory: this call goes unwatched
    watched_.clear();
  }
  on_ = !watched_.empty();
  r_ = r;
  if (b == Fn::Request_free) all_ = true;  // a freed request is no longer ours to watch
  if (b == Fn::Cancel) on_ = false;
}

void RequestScope::end() noexcept {
  std::lock_guard<std::mutex> lk(g_mu);
  for (const auto& [i, h] : watched_) {
    const bool done = all_ || r_[i] == MPI_REQUEST_NULL || std::find(done_.begin(), done_.end(), i) != done_.end();
    if (!done) continue;
    Pending* p = find(h);
    if (!p) continue;
    if (p->persistent && r_[i] != MPI_REQUEST_NULL) {  // inactive until its next MPI_Start
      p->seq = 0;
      p->first_wait_ns = 0;
    } else {
      *p = g_pending.back();
      g_pending.pop_back();
    }
  }
}

std::vector<PendingCall> waiting_requests() {
  std::vector<PendingCall> out;
  std::lock_guard<std::mutex> lk(g_mu);
  for (const Pending& p : g_pending) {
    if (!p.seq || !p.first_wait_ns) continue;
    PendingCall c;
    c.id = p.id;
    c.comm = p.comm;
    c.seq = p.seq;
    c.fn = p.fn;
    c.root = p.root;
    c.count = p.count;
    c.ra = p.wait_ra;
    c.t0 = p.first_wait_ns;
    out.push_back(c);
  }
  return out;
}

}  // namespace hier::diag
