// How a member waits for its peers' flags. Ranks may outnumber cores (8 ranks on 2 cores here):
// a waiter that only spins keeps the very peer it waits for off the core. So it spins briefly
// (a peer on another core answers within a microsecond or so), then yields the core on every
// further try, then sleeps in short naps, so that a long wait costs the others almost nothing.
#pragma once

#include <cstdint>

namespace hier::shm {

class Backoff {
 public:
  // One more unsuccessful try: pause, yield or nap, by how many came before.
  void pause();
  void reset() { tries_ = 0; }

 private:
  uint64_t tries_ = 0;
};

// Waits until pred() holds.
template <class Pred>
void wait_until(Pred pred) {
  Backoff b;
  while (!pred()) b.pause();
}

}  // namespace hier::shm
