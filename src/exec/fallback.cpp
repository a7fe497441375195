#include "exec/fallback.hpp"

#include <array>
#include <atomic>
#include <nlohmann/json.hpp>
#include <string>

#include "base/hooks.hpp"
#include "diag/log.hpp"

namespace hier::exec {
namespace {

constexpr std::array<const char*, static_cast<size_t>(Acquire::Count)> kNames = {"levels", "plan", "scratch"};
constexpr std::array<const char*, static_cast<size_t>(Acquire::Count)> kWhat = {
    "could not create its level communicators", "could not build a schedule", "could not reserve scratch memory"};

struct Counts {
  std::atomic<uint64_t> local{0}, remote{0};
  std::atomic<bool> logged{false};
};
std::array<Counts, static_cast<size_t>(Acquire::Count)> g_counts;

std::string fallbacks_report() {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < g_counts.size(); ++i) {
    const uint64_t l = g_counts[i].local.load(), r = g_counts[i].remote.load();
    if (l + r) j[kNames[i]] = {{"calls", l + r}, {"failed_here", l}};
  }
  return j.dump();
}

}  // namespace

void note_fallback(Acquire point, bool local) {
  static const bool registered = (base::add_report_section("fallbacks", fallbacks_report), true);
  (void)registered;
  Counts& c = g_counts[static_cast<size_t>(point)];
  (local ? c.local : c.remote).fetch_add(1, std::memory_order_relaxed);
  if (local && !c.logged.exchange(true))
    HIER_WARN("exec", "this rank %s; every rank of the communicator runs the call with the MPI's own algorithm instead",
              kWhat[static_cast<size_t>(point)]);
}

uint64_t fallbacks(Acquire point) {
  const Counts& c = g_counts[static_cast<size_t>(point)];
  return c.local.load() + c.remote.load();
}

}  // namespace hier::exec
