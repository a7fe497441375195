// The watchdog's view of nonblocking and persistent collectives (watch.hpp, RequestScope): which
// collective each outstanding request runs (communicator, sequence number, signature) and since
// when its rank waits for it. A short list under a mutex: touched only with the watchdog on, by
// the calls that start, wait for, test or free requests, and by the watchdog thread each tick.
#include <algorithm>
#include <mutex>

#include "diag/call_site.hpp"
#include "diag/flight.hpp"
#include "diag/watch.hpp"
#include "diag/watch_state.hpp"
#include "hier/fn.hpp"

namespace hier::diag {

namespace {

// seq 0: a persistent collective not started; ra and t0_ns: the first wait or test's site and
// time (t0_ns 0: nobody waits for it yet).
struct Pending : PendingCall {
  MPI_Request handle = MPI_REQUEST_NULL;
  bool persistent = false;
  FlightRef flight;  // the call in the flight recorder, marked completed with the request
};

// More outstanding collective requests than this are not watched (the list is searched linearly).
constexpr size_t kMaxPending = 1024;

std::mutex g_pending_mu;
std::vector<Pending> g_pending;
uint64_t g_next_id = 1;

Pending* find(MPI_Request h) {
  if (h == MPI_REQUEST_NULL) return nullptr;
  for (Pending& p : g_pending)
    if (p.handle == h) return &p;
  return nullptr;
}

void start(Pending& p, const void* ra) {
  p.seq = watch_next_seq(p.comm, p.fn, p.count, p.root);
  p.t0_ns = 0;
  p.ra = nullptr;
  p.id = g_next_id++;
  p.flight = flight_started(p.fn, p.comm->key, p.seq, p.count, p.root, ra);
}


// Adds (or, for a handle the MPI reuses after an untracked completion, replaces) a request.
Pending* keep_locked(MPI_Request h) {
  Pending* p = find(h);
  if (!p) {
    if (g_pending.size() >= kMaxPending) return nullptr;
    g_pending.emplace_back();
    p = &g_pending.back();
  }
  *p = Pending{};
  p->handle = h;
  return p;
}

}  // namespace

void StartScope::begin(int fn, MPI_Comm comm, int64_t count, int root, const void* ra) noexcept {
  CommWatch* w = watch_comm(comm);
  if (!w) return;
  fn_ = fn;
  root_ = root;
  count_ = count;
  comm_ = w;
  CallSlot* s = this_thread_slot();
  if (s) {  // the call itself, while it runs, as a blocking call would be
    watch_begin(s, fn, comm, count, root, call_site(ra), watch_now_ns());
    slot_ = s;
    seq_ = s->call.seq;
  } else {
    seq_ = watch_take_number(w, fn, count, root);
  }
}

void StartScope::keep(const MPI_Request* req) noexcept {
  if (!req || *req == MPI_REQUEST_NULL) return;
  std::lock_guard<std::mutex> lk(g_pending_mu);
  try {
    Pending* p = keep_locked(*req);
    if (!p) return;
    p->comm = comm_;
    p->seq = seq_;
    p->fn = fn_;
    p->count = count_;
    p->root = root_;
    p->id = g_next_id++;
    p->flight = flight_current();
  } catch (...) {  // out of memory: this request goes unwatched
  }
}

void watch_persistent_made(int fn, MPI_Comm comm, int64_t count, int root, const MPI_Request* req) {
  if (!req || *req == MPI_REQUEST_NULL) return;
  CommWatch* w = watch_comm(comm);
  if (!w) return;
  std::lock_guard<std::mutex> lk(g_pending_mu);
  Pending* p = keep_locked(*req);
  if (!p) return;
  p->comm = w;
  p->fn = fn;
  p->count = count;
  p->root = root;
  p->persistent = true;  // seq 0: inactive until MPI_Start
}

void RequestScope::begin(int fn, int n, MPI_Request* r, const void* ra) noexcept {
  std::lock_guard<std::mutex> lk(g_pending_mu);
  if (g_pending.empty() || !r) return;
  const Fn b = base_of(static_cast<Fn>(fn));
  const bool starts = b == Fn::Start || b == Fn::Startall;
  try {
    for (int i = 0; i < n; ++i) {
      Pending* p = find(r[i]);
      if (!p) continue;
      if (starts) {
        if (p->persistent) start(*p, ra);
        continue;
      }
      if (p->seq && !p->t0_ns && b != Fn::Request_free && b != Fn::Cancel) {
        p->t0_ns = watch_now_ns();
        p->ra = call_site(ra);  // the program's line (diag/call_site.hpp), at the first wait only
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
  std::lock_guard<std::mutex> lk(g_pending_mu);
  for (const auto& [i, h] : watched_) {
    const bool done = all_ || r_[i] == MPI_REQUEST_NULL || std::find(done_.begin(), done_.end(), i) != done_.end();
    if (!done) continue;
    Pending* p = find(h);
    if (!p) continue;
    flight_mark_completed(p->flight);
    if (p->persistent && r_[i] != MPI_REQUEST_NULL) {  // inactive until its next MPI_Start
      p->seq = 0;
      p->t0_ns = 0;
    } else {
      *p = g_pending.back();
      g_pending.pop_back();
    }
  }
}

std::vector<PendingCall> waiting_requests() {
  std::vector<PendingCall> out;
  std::lock_guard<std::mutex> lk(g_pending_mu);
  for (const Pending& p : g_pending) {
    if (!p.seq || !p.t0_ns) continue;
    out.push_back(p);  // sliced to the PendingCall it is
  }
  return out;
}

}  // namespace hier::diag
