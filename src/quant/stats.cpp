#include "quant/stats.hpp"

#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "base/hooks.hpp"
#include "quant/feedback.hpp"

namespace hier::quant {
namespace {

using config::Coll;

// One mutex: quantized calls are large.
std::mutex g_stats_mu;

struct CollStats {
  uint64_t calls = 0, int8 = 0, int4 = 0;
  uint64_t requests = 0;  // of those calls, nonblocking or persistent (one per start)
  uint64_t cross_exact = 0, cross_sent = 0;  // bytes this rank sends across nodes: exact equivalent, quantized
  uint64_t checked = 0;
  double max_abs = 0, max_rel = 0;
  double quant_ns = 0, exact_ns = 0;  // the planner's predictions for these calls, summed
};
std::map<Coll, CollStats> g_stats;

struct SiteCheck {
  uint64_t checked = 0;
  double max_abs = 0, max_rel = 0;
};
constexpr size_t kMaxCheckedSites = 64;
std::map<Site, SiteCheck> g_site_checks;
uint64_t g_sites_unrecorded = 0;

std::map<std::pair<const void*, Coll>, uint64_t> g_check_counters;

std::string report() {
  const FeedbackTotals fb = feedback_totals();
  std::lock_guard<std::mutex> lk(g_stats_mu);
  nlohmann::json j = nlohmann::json::object();
  nlohmann::json colls = nlohmann::json::object();
  for (const auto& [c, st] : g_stats) {
    nlohmann::json e = {{"calls", st.calls},
                        {"int8", st.int8},
                        {"int4", st.int4},
                        {"requests", st.requests},
                        {"cross_bytes_exact", st.cross_exact},
                        {"cross_bytes_sent", st.cross_sent},
                        {"cross_bytes_saved", st.cross_exact - st.cross_sent},
                        {"predicted_ms", st.quant_ns / 1e6},
                        {"exact_predicted_ms", st.exact_ns / 1e6}};
    if (st.checked) e["check"] = {{"calls", st.checked}, {"max_abs_error", st.max_abs}, {"max_rel_error", st.max_rel}};
    colls[config::kCollKeys[static_cast<size_t>(c)]] = e;
  }
  j["collectives"] = colls;
  j["block"] = config::get().quant_block;
  const int64_t cap = config::get().quant_feedback_cap;
  if (cap > 0)
    j["feedback"] = {{"cap_bytes", cap}, {"bytes", fb.bytes}, {"sites", fb.sites},
                     {"calls", fb.calls}, {"sites_refused", fb.refused}};
  if (!g_site_checks.empty()) {
    nlohmann::json sites = nlohmann::json::array();
    for (const auto& [site, sc] : g_site_checks) {
      char addr[32];
      std::snprintf(addr, sizeof addr, "%p", std::get<2>(site));
      sites.push_back({{"collective", config::kCollKeys[static_cast<size_t>(std::get<1>(site))]},
                       {"buffer", addr},
                       {"count", std::get<3>(site)},
                       {"checked", sc.checked},
                       {"max_abs_error", sc.max_abs},
                       {"max_rel_error", sc.max_rel}});
    }
    j["checked_sites"] = sites;
    if (g_sites_unrecorded) j["checked_sites_not_listed"] = g_sites_unrecorded;
  }
  return j.dump();
}

void register_report() {
  static const bool registered = (base::add_report_section("quantization", report), true);
  (void)registered;
}

}  // namespace

void note_call(Coll c, int bits, int64_t exact_bytes, int64_t sent_bytes, double quant_ns, double exact_ns,
               bool request) {
  register_report();
  std::lock_guard<std::mutex> lk(g_stats_mu);
  CollStats& st = g_stats[c];
  ++st.calls;
  ++(bits == 8 ? st.int8 : st.int4);
  if (request) ++st.requests;
  st.cross_exact += static_cast<uint64_t>(exact_bytes);
  st.cross_sent += static_cast<uint64_t>(sent_bytes);
  st.quant_ns += quant_ns;
  st.exact_ns += exact_ns;
}

bool check_this_call(const void* ctx, Coll c) {
  const int every = config::get().quant_check_every;
  if (every <= 0) return false;
  std::lock_guard<std::mutex> lk(g_stats_mu);
  return g_check_counters[{ctx, c}]++ % static_cast<uint64_t>(every) == 0;
}

void note_check_error(const Site& site, double mabs, double rel) {
  std::lock_guard<std::mutex> lk(g_stats_mu);
  CollStats& st = g_stats[std::get<1>(site)];
  ++st.checked;
  st.max_abs = std::max(st.max_abs, mabs);
  st.max_rel = std::max(st.max_rel, rel);
  auto it = g_site_checks.find(site);
  if (it == g_site_checks.end()) {
    if (g_site_checks.size() >= kMaxCheckedSites) {
      ++g_sites_unrecorded;
      return;
    }
    it = g_site_checks.emplace(site, SiteCheck{}).first;
  }
  ++it->second.checked;
  it->second.max_abs = std::max(it->second.max_abs, mabs);
  it->second.max_rel = std::max(it->second.max_rel, rel);
}

}  // namespace hier::quant
