#include "quant/feedback.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "base/hooks.hpp"

namespace hier::quant {
namespace {

std::mutex g_feedback_mu;

// Shared with the calls that use it: a request holds its site's residual until it completes, so
// that a later call replacing the site's memory (another size) never frees it under the request.
struct Residual {
  std::shared_ptr<char[]> mem;
  int64_t bytes = 0;
  const ResidualMemory* where = nullptr;  // null: host memory
};

// `bytes` of zeros in host memory, or in `where`'s; null when they cannot be had.
std::shared_ptr<char[]> zeroed(int64_t bytes, const ResidualMemory* where) {
  const auto n = static_cast<size_t>(bytes);
  if (where) {
    void* p = where->alloc(n);
    if (!p) return nullptr;
    std::shared_ptr<char[]> mem(static_cast<char*>(p), [r = where->release](char* q) { r(q); });
    return where->zero(p, n) ? mem : nullptr;
  }
  std::shared_ptr<char[]> mem(new (std::nothrow) char[n]);
  if (mem) std::memset(mem.get(), 0, n);
  return mem;
}
std::map<Site, Residual> g_residuals;
int64_t g_residual_bytes = 0;
uint64_t g_residual_refused = 0, g_feedback_calls = 0;

// At MPI_Finalize (after the report): the residuals in an allocator's memory go back to it while
// its module is surely still there (a request not yet freed keeps its own until it is).
void release_allocated() {
  std::lock_guard<std::mutex> lk(g_feedback_mu);
  for (auto it = g_residuals.begin(); it != g_residuals.end();) {
    if (!it->second.where) {
      ++it;
      continue;
    }
    g_residual_bytes -= it->second.bytes;
    it = g_residuals.erase(it);
  }
}

}  // namespace

std::shared_ptr<char[]> residual(const Site& site, int64_t bytes, const ResidualMemory* where) {
  const int64_t cap = config::get().quant_feedback_cap;
  if (cap <= 0 || bytes <= 0) return nullptr;
  if (where) {
    static const bool hooked = (base::add_finalize_hook(release_allocated), true);
    (void)hooked;
  }
  std::lock_guard<std::mutex> lk(g_feedback_mu);
  auto it = g_residuals.find(site);
  if (it != g_residuals.end() && it->second.bytes == bytes && it->second.where == where) {
    ++g_feedback_calls;
    return it->second.mem;
  }
  const int64_t freed = it != g_residuals.end() ? it->second.bytes : 0;
  if (g_residual_bytes - freed + bytes > cap) {
    ++g_residual_refused;
    return nullptr;
  }
  std::shared_ptr<char[]> mem = zeroed(bytes, where);
  if (!mem) {
    ++g_residual_refused;
    return nullptr;
  }
  g_residual_bytes += bytes - freed;
  Residual& r = g_residuals[site];
  r.mem = std::move(mem);
  r.bytes = bytes;
  r.where = where;
  ++g_feedback_calls;
  return r.mem;
}

FeedbackTotals feedback_totals() {
  std::lock_guard<std::mutex> lk(g_feedback_mu);
  return {g_residual_bytes, g_residuals.size(), g_feedback_calls, g_residual_refused};
}

}  // namespace hier::quant
