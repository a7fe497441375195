// Each thread's blocking collective in flight (the hot path: a few plain stores under a seqlock)
// and the watchdog thread's consistent reads of them.
#include <mutex>

#include "diag/watch_state.hpp"

namespace hier::diag {

namespace {

constexpr int kMaxSlots = 64;

std::mutex g_slots_mu;  // a thread's first slot
CallSlot g_slots[kMaxSlots];
std::atomic<int> g_n_slots{0};

thread_local CallSlot* tl_slot __attribute__((tls_model("initial-exec"))) = nullptr;

}  // namespace

CallSlot* this_thread_slot() {
  if (tl_slot) return tl_slot;
  std::lock_guard<std::mutex> lk(g_slots_mu);
  const int n = g_n_slots.load();
  if (n >= kMaxSlots) return nullptr;
  tl_slot = &g_slots[n];
  g_n_slots.store(n + 1, std::memory_order_release);
  return tl_slot;
}

void watch_begin(CallSlot* s, int fn, MPI_Comm comm, int64_t count, int root, const void* ra, uint64_t t0_ns) {
  CommWatch* w = watch_comm(comm);
  if (!w) return;
  const uint64_t seq = watch_take_number(w, fn, count, root);
  const uint64_t g0 = s->gen.load(std::memory_order_relaxed);
  s->gen.store(g0 + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->call = WatchedCall{w, seq, fn, root, count, ra, t0_ns};
  s->gen.store(g0 + 2, std::memory_order_release);
  s->active.store(1, std::memory_order_release);
}

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

int n_call_slots() { return g_n_slots.load(std::memory_order_acquire); }

CallSlot& call_slot(int i) { return g_slots[i]; }

CallView view_of(const PendingCall& p) {
  CallView v;
  v.active = true;
  v.gen = p.id;
  static_cast<WatchedCall&>(v) = p;
  return v;
}

}  // namespace hier::diag
