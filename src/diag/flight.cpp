// The flight recorder's rings (hot path: one writer per ring, relaxed stores under a per-entry
// generation count) and their reading for the side channel's answer.
#include "diag/flight.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <new>
#include <vector>

#include "diag/call_site.hpp"
#include "diag/flight_compare.hpp"
#include "diag/watch_state.hpp"
#include "diag/where.hpp"
#include "hier/fn.hpp"

namespace hier::diag {

bool g_flight_on = false;

// Named, not anonymous: FlightRing (declared in flight.hpp) holds Entry fields.
namespace flight_detail {

constexpr int kMaxRings = 1024;  // threads that record (beyond: their calls are not recorded)

enum State : uint8_t { kEntered = 'E', kCompleted = 'C', kPending = 'P' };

// One call. `gen` is odd while the owning thread writes the entry; `n` is the call's number in
// the ring (1, 2, ...; 0: never written).
struct Entry {
  std::atomic<uint64_t> gen{0};
  std::atomic<uint64_t> n{0};
  std::atomic<uint64_t> comm{0}, seq{0}, bytes{0};
  std::atomic<int64_t> count{-1};
  std::atomic<const void*> ra{nullptr};
  std::atomic<int32_t> fn{0}, root{-1};
  std::atomic<uint8_t> state{0};
};

}  // namespace flight_detail
using flight_detail::Entry;
using flight_detail::kMaxRings;
using flight_detail::State;
using flight_detail::kEntered;
using flight_detail::kCompleted;
using flight_detail::kPending;

struct FlightRing {
  uint32_t cap = 0;
  uint32_t next_slot = 0;  // owner only
  uint64_t calls = 0;      // owner only
  FlightRing* next = nullptr;
  Entry* e = nullptr;
};

namespace {

int g_cap = 0;
std::atomic<FlightRing*> g_rings{nullptr};  // every thread's ring; pushed, never popped
std::atomic<int> g_n_rings{0};
thread_local FlightRing* tl_ring __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local bool tl_no_ring __attribute__((tls_model("initial-exec"))) = false;
thread_local FlightRef tl_current __attribute__((tls_model("initial-exec")));

FlightRing* new_ring() noexcept {
  if (tl_no_ring || g_n_rings.fetch_add(1) >= kMaxRings) {
    tl_no_ring = true;
    return nullptr;
  }
  auto* r = new (std::nothrow) FlightRing();
  Entry* e = r ? new (std::nothrow) Entry[static_cast<size_t>(g_cap)] : nullptr;
  if (!e) {
    delete r;
    tl_no_ring = true;
    return nullptr;
  }
  r->cap = static_cast<uint32_t>(g_cap);
  r->e = e;
  r->next = g_rings.load(std::memory_order_relaxed);
  while (!g_rings.compare_exchange_weak(r->next, r, std::memory_order_release, std::memory_order_relaxed)) {
  }
  tl_ring = r;
  return r;
}

// A consistent copy of entry `e` (false: empty, or rewritten while read).
bool read_entry(const Entry& e, RecentCall& c, const void*& ra, uint64_t& n) {
  for (int tries = 0; tries < 100; ++tries) {
    const uint64_t g0 = e.gen.load(std::memory_order_acquire);
    if (g0 & 1) continue;
    n = e.n.load(std::memory_order_relaxed);
    const int fn = e.fn.load(std::memory_order_relaxed);
    c.comm = e.comm.load(std::memory_order_relaxed);
    c.seq = e.seq.load(std::memory_order_relaxed);
    c.bytes = e.bytes.load(std::memory_order_relaxed);
    c.count = e.count.load(std::memory_order_relaxed);
    c.root = e.root.load(std::memory_order_relaxed);
    c.state = static_cast<char>(e.state.load(std::memory_order_relaxed));
    ra = e.ra.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.gen.load(std::memory_order_relaxed) != g0) continue;
    if (n == 0 || fn < 0 || fn >= static_cast<int>(Fn::Count)) return false;
    const Fn b = base_of(static_cast<Fn>(fn));
    c.call = fn_name(static_cast<int>(fn));
    // A count that differs by rank in a correct program (the v/w variants) is not compared.
    if (!kFnBytesAgree[static_cast<int>(b)]) c.count = -1;
    return true;
  }
  return false;
}

// Writes one call into this thread's ring (ring null: no ring to be had).
FlightRef record(int fn, uint64_t key, uint64_t seq, int64_t count, int root, const void* ra, uint8_t state) noexcept {
  FlightRing* r = tl_ring;
  if (__builtin_expect(!r, 0) && !(r = new_ring())) return {};
  const uint32_t s = r->next_slot;
  r->next_slot = s + 1 == r->cap ? 0 : s + 1;
  const uint64_t n = ++r->calls;
  Entry& e = r->e[s];
  const uint64_t g0 = e.gen.load(std::memory_order_relaxed);
  e.gen.store(g0 + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.n.store(n, std::memory_order_relaxed);
  e.comm.store(key, std::memory_order_relaxed);
  e.seq.store(seq, std::memory_order_relaxed);
  e.bytes.store(0, std::memory_order_relaxed);
  e.count.store(count, std::memory_order_relaxed);
  e.ra.store(ra, std::memory_order_relaxed);
  e.fn.store(fn, std::memory_order_relaxed);
  e.root.store(root, std::memory_order_relaxed);
  e.state.store(state, std::memory_order_relaxed);
  e.gen.store(g0 + 2, std::memory_order_release);
  return {r, s, n};
}

}  // namespace

void FlightScope::begin(int fn, MPI_Comm comm, int64_t count, int root, const void* ra, bool nonblocking) noexcept {
  uint64_t key = 0, seq = 0;
  try {
    if (CommWatch* w = watch_comm(comm)) {
      seq = watch_number_call(w, fn, count, root);
      key = w->key;
    }
  } catch (...) {  // no memory for the communicator's state: recorded without one
  }
  // The program's own line (diag/call_site.hpp) only where a reader can ask for it: the hang
  // report, with the watchdog on. Otherwise the raw return address, so a Fortran or Python
  // program pays no stack walk for a recorder nobody reads.
  ref_ = record(fn, key, seq, count, root, g_watch_on ? call_site(ra) : ra, kEntered);
  nonblocking_ = nonblocking;
  tl_current = ref_;
}

FlightRef flight_started(int fn, uint64_t key, uint64_t seq, int64_t count, int root, const void* ra) noexcept {
  return g_flight_on ? record(fn, key, seq, count, root, g_watch_on ? call_site(ra) : ra, kPending) : FlightRef{};
}

void FlightScope::end() noexcept {
  Entry& e = ref_.ring->e[ref_.slot];  // this thread's: no other call of it came in between
  e.bytes.store(bytes_, std::memory_order_relaxed);
  // A nonblocking call that returned a request: pending until the request completes (followed
  // with the watchdog on: watch_requests.cpp marks it). One that failed has no request.
  e.state.store(nonblocking_ && started_ ? kPending : kCompleted, std::memory_order_release);
  tl_current = FlightRef{};
  watch_forget_number();
}

FlightRef flight_current() { return tl_current; }

void flight_mark_completed(const FlightRef& r) noexcept {
  if (!r.ring) return;
  Entry& e = r.ring->e[r.slot];
  // Marked by another thread than the ring's owner (a request completed elsewhere): a store of
  // one byte, dropped when the slot holds another call by now.
  if (e.n.load(std::memory_order_acquire) == r.n) e.state.store(kCompleted, std::memory_order_release);
}

void flight_init(int n) {
  if (n <= 0) return;
  g_cap = n;
  comm_watch_init();
  g_flight_on = true;
}

void flight_finalize() { g_flight_on = false; }

std::string flight_answer(uint64_t key, bool resolve, size_t max_bytes) {
  // Each thread's calls in their order (threads one after the other: they share no clock here).
  std::vector<RecentCall> calls;
  std::vector<const void*> ras;
  for (FlightRing* r = g_rings.load(std::memory_order_acquire); r; r = r->next) {
    struct Read {
      uint64_t n;
      RecentCall c;
      const void* ra;
    };
    std::vector<Read> got;
    for (uint32_t i = 0; i < r->cap; ++i) {
      Read x{0, {}, nullptr};
      if (read_entry(r->e[i], x.c, x.ra, x.n)) got.push_back(std::move(x));
    }
    std::sort(got.begin(), got.end(), [](const Read& a, const Read& b) { return a.n < b.n; });
    for (Read& x : got) {
      calls.push_back(std::move(x.c));
      ras.push_back(x.ra);
    }
  }
  if (resolve) {
    std::map<const void*, std::string> names;
    for (const void* ra : ras)
      if (ra) names[ra];
    std::vector<const void*> uniq;
    for (auto& [ra, _] : names) uniq.push_back(ra);
    const std::vector<where::Frame> fr = where::resolve(uniq);
    for (size_t i = 0; i < uniq.size() && i < fr.size(); ++i) names[uniq[i]] = where::describe(fr[i]);
    for (size_t i = 0; i < calls.size(); ++i)
      if (ras[i]) calls[i].site = names[ras[i]];
  }
  return encode_recent(calls, key, max_bytes);
}

}  // namespace hier::diag
