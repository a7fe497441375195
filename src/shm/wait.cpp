#include "shm/wait.hpp"

#include <sched.h>
#include <time.h>

namespace hier::shm {
namespace {
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
  if (tries_ <= p_.spin) {
    cpu_relax();
  } else if (tries_ <= p_.spin + p_.yield || p_.nap_ns <= 0) {
    sched_yield();
  } else {
    const timespec ts{0, p_.nap_ns};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace hier::shm
