#include "diag/report.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "config/registry.hpp"
#include "base/hooks.hpp"
#include "base/runtime.hpp"
#include "diag/log.hpp"
#include "diag/stats.hpp"
#include "util/files.hpp"
#include "util/strings.hpp"

namespace hier::diag {

namespace {
nlohmann::json config_json(const config::Config& c) {
  nlohmann::json j;
  j["HIER_DISABLE"] = c.disable;
  j["HIER_STRICT"] = c.strict;
  j["HIER_LEVELS"] = config::levels_to_string(c);
  nlohmann::json algo, quant;
  for (size_t i = 0; i < config::kCollKeys.size(); ++i) {
    algo[config::kCollKeys[i]] = config::to_string(c.algo[i]);
    quant[config::kCollKeys[i]] = config::to_string(c.quant[i]);
  }
  j["HIER_ALGO"] = algo;
  j["HIER_QUANT"] = quant;
  j["HIER_DEBUG"] = config::to_string(c.debug);
  j["HIER_DEBUG_FILE"] = c.debug_file;
  j["HIER_REPORT"] = c.report;
  j["HIER_CHUNK"] = config::chunk_to_string(c.chunk_bytes);
  j["HIER_WATCHDOG"] = c.watchdog_s;
  j["HIER_TUNE_FILE"] = c.tune_file;
  return j;
}
}  // namespace

std::string report_json(const config::Config& cfg, int rank, int size, const std::string& mpi_library) {
  nlohmann::json j;
  j["format"] = "libhier-report/1";
  j["libhier"] = {{"version", HIER_VERSION_STRING}, {"built_for", base::built_for_mpi()}};
  j["mpi_library"] = mpi_library;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  j["rank"] = rank;
  j["size"] = size;
  j["host"] = host;
  j["pid"] = static_cast<int>(getpid());
  j["config"] = config_json(cfg);
  nlohmann::json fns = nlohmann::json::object();
  for (size_t f = 0; f < static_cast<size_t>(Fn::Count); ++f) {
    const FnTotals c = totals(static_cast<Fn>(f));
    if (!c.calls) continue;
    nlohmann::json e;
    e["calls"] = c.calls;
    e["errors"] = c.errors;
    nlohmann::json algos = nlohmann::json::object();
    for (size_t a = 0; a < static_cast<size_t>(AlgoTag::Count); ++a)
      if (c.algo_calls[a]) algos[kAlgoNames[a]] = {{"calls", c.algo_calls[a]}, {"bytes", c.algo_bytes[a]}};
    e["algorithms"] = algos;
    fns[kFnNames[f]] = e;
  }
  j["functions"] = fns;
  base::for_each_report_section([&](const std::string& key, const std::string& text) {
    // A section that does not parse stays a section (its error), not an invalid report.
    nlohmann::json v = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded()) v = {{"error", "this section is not valid JSON"}};
    j[key] = std::move(v);
  });
  // Strings from outside (host name, file names, peers' answers) may hold invalid UTF-8: replaced.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

void write_report(const config::Config& cfg, int rank, int size, const std::string& mpi_library) {
  const std::string path = util::expand_path_template(cfg.report, rank);
  std::string err;
  if (!util::write_file_replacing(path, report_json(cfg, rank, size, mpi_library) + "\n", err))
    HIER_WARN("report", "HIER_REPORT: cannot write '%s' (%s)", path.c_str(), err.c_str());
}

}  // namespace hier::diag
