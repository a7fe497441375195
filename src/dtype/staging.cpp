#include "dtype/staging.hpp"

#include <bit>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace hier::dtype {
namespace {

constexpr size_t kMinClass = 12;                  // 4 KiB
constexpr size_t kMaxKept = size_t{64} << 20;     // keep at most 64 MiB of idle buffers
// A halo exchange keeps up to 2 x 26 messages in flight, many of one size class; fewer kept
// buffers would free and re-allocate (above 128 KiB: mmap, munmap and page faults) most of
// them on every exchange. The 64 MiB cap bounds the total.
constexpr size_t kPerClass = 64;

std::mutex g_staging_mu;
std::vector<Staging> g_free[64];
size_t g_kept = 0;

size_t class_of(size_t bytes) {
  const size_t c = std::bit_width(bytes > 1 ? bytes - 1 : 1);
  return c < kMinClass ? kMinClass : c;
}

}  // namespace

Staging stage_acquire(size_t bytes) {
  const size_t c = class_of(bytes);
  {
    std::lock_guard<std::mutex> lk(g_staging_mu);
    if (!g_free[c].empty()) {
      Staging s = g_free[c].back();
      g_free[c].pop_back();
      g_kept -= s.cap;
      return s;
    }
  }
  const size_t cap = size_t{1} << c;
  return {static_cast<char*>(std::aligned_alloc(64, cap)), cap};
}

void stage_release(Staging s) {
  if (!s.p) return;
  {
    std::lock_guard<std::mutex> lk(g_staging_mu);
    const size_t c = class_of(s.cap);
    if (g_free[c].size() < kPerClass && g_kept + s.cap <= kMaxKept) {
      g_free[c].push_back(s);
      g_kept += s.cap;
      return;
    }
  }
  std::free(s.p);
}

void stage_trim() {
  std::lock_guard<std::mutex> lk(g_staging_mu);
  for (auto& v : g_free) {
    for (Staging& s : v) std::free(s.p);
    v.clear();
  }
  g_kept = 0;
}

}  // namespace hier::dtype
