#include "diag/stats.hpp"

namespace hier::diag {

FnCounters g_counters[static_cast<size_t>(Fn::Count)];

void reset_counters() {
  for (FnCounters& c : g_counters) {
    c.calls = 0;
    c.errors = 0;
    for (AlgoCounter& a : c.algo) {
      a.calls = 0;
      a.bytes = 0;
    }
  }
}

}  // namespace hier::diag
