#include "shm/wait.hpp"

#include <sched.h>
#include <time.h>

namespace hier::shm {
namespace {
// Tries spent spinning, then yielding, before naps (docs/shm.md: the measured costs).
constexpr uint64_t kSpin = 256, kYield = kSpin + 4096;
constexpr long kNapNs = 20000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
}  // namespace

void Backoff::pause() {
  ++tries_;
  if (tries_ <= kSpin) {
    cpu_relax();
  } else if (tries_ <= kYield) {
    sched_yield();
  } else {
    const timespec ts{0, kNapNs};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace hier::shm
