#include "diag/stats.hpp"

namespace hier::diag {
namespace {
// Head of the list of blocks; pushed lock-free, never popped. Constant-initialized, so it is
// usable before any constructor runs (the wrappers may be called that early).
std::atomic<CounterBlock*> g_blocks{nullptr};
}  // namespace

thread_local CounterBlock* tl_counters = nullptr;

CounterBlock* new_counter_block() {
  auto* b = new CounterBlock();
  b->next = g_blocks.load(std::memory_order_relaxed);
  while (!g_blocks.compare_exchange_weak(b->next, b, std::memory_order_release, std::memory_order_relaxed)) {
  }
  tl_counters = b;
  return b;
}

FnTotals totals(Fn f) {
  FnTotals t;
  for (CounterBlock* b = g_blocks.load(std::memory_order_acquire); b; b = b->next) {
    const FnCounters& c = b->fn[static_cast<size_t>(f)];
    t.calls += c.calls.load(std::memory_order_relaxed);
    t.errors += c.errors.load(std::memory_order_relaxed);
    for (size_t a = 0; a < static_cast<size_t>(AlgoTag::Count); ++a) {
      t.algo_calls[a] += c.algo[a].calls.load(std::memory_order_relaxed);
      t.algo_bytes[a] += c.algo[a].bytes.load(std::memory_order_relaxed);
    }
  }
  return t;
}

}  // namespace hier::diag
