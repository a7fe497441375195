// Per-function counters: calls, and per algorithm the calls and bytes. Each thread counts in a
// block of its own with plain loads and stores (relaxed atomics, one writer per block: no
// locked instruction on the passthrough path, which is measured in nanoseconds); the report
// sums the blocks. Blocks are never freed, so a thread's counts outlive it.
#pragma once

#include <atomic>
#include <cstdint>

#include "hier/fn.hpp"

namespace hier::diag {

// How a call was carried out. Later features add their own tags here (and a name below).
enum class AlgoTag : uint8_t { Flat, Hier, HierInt8, HierInt4, Packed, Count };
inline constexpr const char* kAlgoNames[] = {"flat", "hier", "hier_int8", "hier_int4", "packed"};
static_assert(sizeof(kAlgoNames) / sizeof(kAlgoNames[0]) == static_cast<size_t>(AlgoTag::Count));

struct AlgoCounter {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> bytes{0};
};

struct FnCounters {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> errors{0};  // calls that returned an MPI error code
  AlgoCounter algo[static_cast<size_t>(AlgoTag::Count)];
};

struct CounterBlock {
  FnCounters fn[static_cast<size_t>(Fn::Count)];
  CounterBlock* next = nullptr;  // the list of all threads' blocks
};

// This thread's block, created (and linked into the list) on its first call.
extern thread_local CounterBlock* tl_counters __attribute__((tls_model("initial-exec")));
CounterBlock* new_counter_block();

// Only this thread writes its block: load + store, no read-modify-write instruction.
inline void bump(std::atomic<uint64_t>& a, uint64_t v) {
  a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

inline void record(Fn f, AlgoTag a, int rc, uint64_t bytes) {
  CounterBlock* b = tl_counters;
  if (!b) b = new_counter_block();
  FnCounters& c = b->fn[static_cast<size_t>(f)];
  bump(c.calls, 1);
  if (rc != 0) {
    bump(c.errors, 1);
    return;
  }
  AlgoCounter& ac = c.algo[static_cast<size_t>(a)];
  bump(ac.calls, 1);
  if (bytes) bump(ac.bytes, bytes);
}

// One function's counts summed over every thread's block.
struct FnTotals {
  uint64_t calls = 0, errors = 0;
  uint64_t algo_calls[static_cast<size_t>(AlgoTag::Count)] = {};
  uint64_t algo_bytes[static_cast<size_t>(AlgoTag::Count)] = {};
};
FnTotals totals(Fn f);

}  // namespace hier::diag
