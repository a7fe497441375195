#include "shm/wait.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <time.h>

#include <atomic>

namespace hier::shm {
namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
std::atomic<uint64_t> g_spins{0}, g_yields{0}, g_naps{0};
}  // namespace

void Backoff::pause() {
  ++tries_;
  if (tries_ <= p_.spin) {
    g_spins.fetch_add(1, std::memory_order_relaxed);
    cpu_relax();
  } else if (tries_ <= p_.spin + p_.yield || p_.nap_ns <= 0) {
    g_yields.fetch_add(1, std::memory_order_relaxed);
    sched_yield();
  } else {
    g_naps.fetch_add(1, std::memory_order_relaxed);
    const timespec ts{0, p_.nap_ns};
    nanosleep(&ts, nullptr);
  }
}

WaitCounts wait_counts() {
  return {g_spins.load(std::memory_order_relaxed), g_yields.load(std::memory_order_relaxed),
          g_naps.load(std::memory_order_relaxed)};
}

}  // namespace hier::shm

namespace hier::shm {

void ring(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool sleep_on(const Bell& bell, uint32_t seen) {
  bell.sleepers->fetch_add(1, std::memory_order_seq_cst);
  const timespec ts{0, bell.timeout_ns};
  g_naps.fetch_add(1, std::memory_order_relaxed);
  const long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(bell.word), FUTEX_WAIT, seen, &ts, nullptr, 0);
  bell.sleepers->fetch_sub(1, std::memory_order_seq_cst);
  return rc == 0;
}

}  // namespace hier::shm
