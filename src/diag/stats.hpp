// Per-function counters: calls, and per algorithm the calls and bytes. Lock-free (relaxed
// atomics) so that the passthrough path stays within a few nanoseconds.
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

// Zero-initialized static storage: usable before any constructor runs.
extern FnCounters g_counters[static_cast<size_t>(Fn::Count)];

inline void record(Fn f, AlgoTag a, int rc, uint64_t bytes) {
  FnCounters& c = g_counters[static_cast<size_t>(f)];
  c.calls.fetch_add(1, std::memory_order_relaxed);
  if (rc != 0) {
    c.errors.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  AlgoCounter& ac = c.algo[static_cast<size_t>(a)];
  ac.calls.fetch_add(1, std::memory_order_relaxed);
  if (bytes) ac.bytes.fetch_add(bytes, std::memory_order_relaxed);
}

void reset_counters();  // tests only

}  // namespace hier::diag
