#include "quant/feedback.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <new>

namespace hier::quant {
namespace {

std::mutex g_mu;

// Shared with the calls that use it: a request holds its site's residual until it completes, so
// that a later call replacing the site's memory (another size) never frees it under the request.
struct Residual {
  std::shared_ptr<char[]> mem;
  int64_t bytes = 0;
};
std::map<Site, Residual> g_residuals;
int64_t g_residual_bytes = 0;
uint64_t g_residual_refused = 0, g_feedback_calls = 0;

}  // namespace

std::shared_ptr<char[]> residual(const Site& site, int64_t bytes) {
  const int64_t cap = config::get().quant_feedback_cap;
  if (cap <= 0 || bytes <= 0) return nullptr;
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_residuals.find(site);
  if (it != g_residuals.end() && it->second.bytes == bytes) {
    ++g_feedback_calls;
    return it->second.mem;
  }
  const int64_t freed = it != g_residuals.end() ? it->second.bytes : 0;
  if (g_residual_bytes - freed + bytes > cap) {
    ++g_residual_refused;
    return nullptr;
  }
  std::shared_ptr<char[]> mem(new (std::nothrow) char[static_cast<size_t>(bytes)]);
  if (!mem) {
    ++g_residual_refused;
    return nullptr;
  }
  std::memset(mem.get(), 0, static_cast<size_t>(bytes));
  g_residual_bytes += bytes - freed;
  Residual& r = g_residuals[site];
  r.mem = std::move(mem);
  r.bytes = bytes;
  ++g_feedback_calls;
  return r.mem;
}

FeedbackTotals feedback_totals() {
  std::lock_guard<std::mutex> lk(g_mu);
  return {g_residual_bytes, g_residuals.size(), g_feedback_calls, g_residual_refused};
}

}  // namespace hier::quant
