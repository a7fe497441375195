// How a member waits for its peers' flags. Ranks may outnumber cores (8 ranks on 2 cores here):
// a waiter that only spins keeps the very peer it waits for off the core. So it spins briefly
// (a peer on another core answers within a microsecond or so), then yields the core on every
// further try, then sleeps in short naps, so that a long wait costs the others almost nothing.
// bench/shm/bench_wait.cpp measures the choices (docs/shm.md).
#pragma once

#include <cstdint>

namespace hier::shm {

struct WaitPolicy {
  uint64_t spin = 256;    // tries with a pause instruction
  uint64_t yield = 4096;  // then tries with sched_yield
  long nap_ns = 20000;    // then a nanosleep per try (0: keep yielding)
};

class Backoff {
 public:
  explicit Backoff(const WaitPolicy& p = WaitPolicy{}) : p_(p) {}
  // One more unsuccessful try: pause, yield or nap, by how many came before.
  void pause();
  void reset() { tries_ = 0; }

 private:
  WaitPolicy p_;
  uint64_t tries_ = 0;
};

// What the waiting has cost this process so far: tries that spun, yielded the core, napped
// (the report's shm section; bench/shm/bench_rs.cpp prints them per call).
struct WaitCounts {
  uint64_t spins = 0, yields = 0, naps = 0;
};
WaitCounts wait_counts();

// Waits until pred() holds.
template <class Pred>
void wait_until(Pred pred, const WaitPolicy& p = WaitPolicy{}) {
  Backoff b(p);
  while (!pred()) b.pause();
}

}  // namespace hier::shm
