#include "core/agree_config.hpp"

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "config/registry.hpp"
#include "diag/log.hpp"
#include "model/load.hpp"

namespace hier::core {
namespace {

struct Value {
  const char* name;
  std::string text;  // as set, or the default when unset: "auto" and unset agree
  bool model = false;  // the machine model loaded from HIER_TUNE_FILE, not a variable's text
};

std::vector<Value> values_to_agree() {
  std::vector<Value> v;
  for (const config::VarSpec& spec : config::registry()) {
    if (!spec.same_on_every_rank) continue;
    const char* e = std::getenv(spec.name);
    v.push_back({spec.name, e ? e : spec.default_value});
  }
  // The same path can hold different files on different nodes (no shared file system), or be
  // missing on some: what the planner decides from is the model each rank actually loaded.
  v.push_back({"the machine model (HIER_TUNE_FILE's contents)", model::fingerprint(model::process()), true});
  return v;
}

uint64_t hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The value of `mine` on rank `from`, on every rank.
std::string value_on(int from, int me, const std::string& mine) {
  int len = me == from ? static_cast<int>(mine.size()) : 0;
  PMPI_Bcast(&len, 1, MPI_INT, from, MPI_COMM_WORLD);
  std::string s(static_cast<size_t>(len), '\0');
  if (me == from) s = mine;
  if (len > 0) PMPI_Bcast(s.data(), len, MPI_CHAR, from, MPI_COMM_WORLD);
  return s;
}

bool g_differs = false;

}  // namespace

bool config_differs() { return g_differs; }

bool agree_config(int me) {
  const std::vector<Value> vals = values_to_agree();
  const size_t n = vals.size();
  // max(h) and max(~h) = ~min(h): equal everywhere exactly when min == max.
  std::vector<uint64_t> h(2 * n);
  for (size_t i = 0; i < n; ++i) {
    h[i] = hash(vals[i].text);
    h[n + i] = ~h[i];
  }
  std::vector<uint64_t> mine(h);
  if (PMPI_Allreduce(MPI_IN_PLACE, h.data(), static_cast<int>(2 * n), MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD) !=
      MPI_SUCCESS)
    return true;  // the MPI reports its own failure; nothing to compare
  bool differ = false, model_differs = false;
  for (size_t i = 0; i < n; ++i) {
    if (h[i] == ~h[n + i]) continue;
    (vals[i].model ? model_differs : differ) = true;
    // The rank holding the maximum hash differs from the one holding the minimum: name the
    // lowest rank of each (MINLOC-style, with two allreduces on this rare path).
    int lo[2] = {mine[i] == h[i] ? me : INT32_MAX, mine[i] == ~h[n + i] ? me : INT32_MAX};
    PMPI_Allreduce(MPI_IN_PLACE, lo, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (lo[0] > lo[1]) std::swap(lo[0], lo[1]);
    const std::string a = value_on(lo[0], me, vals[i].text), b = value_on(lo[1], me, vals[i].text);
    if (me == 0)
      log::write(config::LogLevel::Warn, "config", __FILE__, __LINE__,
                 "%s differs between ranks (rank %d: '%s', rank %d: '%s'); it must be the same on every rank: %s",
                 vals[i].name, lo[0], a.c_str(), lo[1], b.c_str(),
                 config::get().strict ? "HIER_STRICT=1: stopping"
                 : vals[i].model     ? "every rank plans with the built-in model"
                                     : "every collective runs with the MPI's own algorithm on every rank");
  }
  if (model_differs && !config::get().strict) model::force_builtin();
  g_differs = differ;
  if (!differ && !model_differs) return true;
  if (config::get().strict) return false;
  if (differ) config::force_flat_collectives();
  return true;
}

}  // namespace hier::core
