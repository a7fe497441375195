// How a member waits for its peers' flags. Ranks may outnumber cores (8 ranks on 2 cores here):
// a waiter that only spins keeps the very peer it waits for off the core. So it spins briefly
// (a peer on another core answers within a microsecond or so), then yields the core on every
// further try, then sleeps in short naps, so that a long wait costs the others almost nothing.
// bench/shm/bench_wait.cpp measures the choices (docs/shm.md).
#pragma once

#include <atomic>
#include <cstdint>

namespace hier::shm {

struct WaitPolicy {
  uint64_t spin = 256;    // tries with a pause instruction
  uint64_t yield = 4096;  // then tries with sched_yield
  long nap_ns = 20000;    // then a nanosleep per try (0: keep yielding)
};

// A segment's bell (Segment::bell): waiters past their spins and yields sleep on it (futex)
// instead of napping, and every flag raised wakes them, so that a waiter gives its core to the
// peers it waits for entirely and is back as soon as one of them raises a flag.
struct Bell {
  std::atomic<uint32_t>* word = nullptr;
  std::atomic<uint32_t>* sleepers = nullptr;
  uint64_t yield = 64;        // yields before the first sleep
  long timeout_ns = 1000000;  // a sleep's bound (a raise that rang no bell, e.g. from a tool)
};
// Wakes every process asleep on `word`.
void ring(std::atomic<uint32_t>& word);

class Backoff {
 public:
  explicit Backoff(const WaitPolicy& p = WaitPolicy{}, const Bell* bell = nullptr) : p_(p), bell_(bell) {}
  // One more unsuccessful try: pause, yield or nap, by how many came before.
  void pause();
  void reset() { tries_ = 0; }

 private:
  WaitPolicy p_;
  const Bell* bell_;
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

// Waits until pred() holds, sleeping on `bell` once spinning and yielding did not do. The bell's
// value is read before pred(): a raise after that changes it, and the sleep then returns at once.
bool sleep_on(const Bell& bell, uint32_t seen);
template <class Pred>
void wait_until(Pred pred, const Bell& bell, const WaitPolicy& p = WaitPolicy{}) {
  Backoff b(p);
  for (uint64_t tries = 0;; ++tries) {
    const uint32_t seen = bell.word->load(std::memory_order_seq_cst);
    if (pred()) return;
    if (tries < p.spin + bell.yield) b.pause();
    else sleep_on(bell, seen);
  }
}

}  // namespace hier::shm
