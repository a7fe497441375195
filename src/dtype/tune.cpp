#include "dtype/tune.hpp"

#include <atomic>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config/config.hpp"
#include "diag/log.hpp"
#include "model/load.hpp"

namespace hier::dtype {
namespace {

using json = nlohmann::json;

void read_line(const json& j, const char* key, CostLine& c) {
  if (!j.contains(key)) return;
  const json& l = j.at(key);
  c.overhead_ns = l.value("overhead_ns", c.overhead_ns);
  c.ns_per_byte = l.value("ns_per_byte", c.ns_per_byte);
  c.ns_per_block = l.value("ns_per_block", c.ns_per_block);
}

json line_json(const CostLine& c) {
  return {{"overhead_ns", c.overhead_ns}, {"ns_per_byte", c.ns_per_byte}, {"ns_per_block", c.ns_per_block}};
}

}  // namespace

TuneModel builtin_model() {
  // The "dtype" object of the built-in model file of this MPI family (src/model/builtin-*.json):
  // `mpiexec -n 2 hier-tune` on the 2-core reference VM, rounded (bench/RESULTS.md, "Datatype
  // engine"; the VM was loaded, so treat them as orders of magnitude and re-tune real nodes).
  TuneModel m;
  const json j = json::parse(model::builtin_text(model::build_family()), nullptr, false);
  std::string err;
  if (j.is_object() && j.contains("dtype")) apply_tune_object(j.at("dtype").dump(), m, err);
  return m;
}

bool apply_tune_object(const std::string& object, TuneModel& m, std::string& err) {
  const json p = json::parse(object, nullptr, /*allow_exceptions=*/false);
  if (p.is_discarded() || !p.is_object()) {
    err = "the datatype model is not a JSON object";
    return false;
  }
  try {
    const std::string pol = p.value("policy", std::string("auto"));
    if (pol == "auto") m.policy = TuneModel::Policy::Auto;
    else if (pol == "always") m.policy = TuneModel::Policy::Always;
    else if (pol == "never") m.policy = TuneModel::Policy::Never;
    else {
      err = "policy '" + pol + "' (allowed: auto, always, never)";
      return false;
    }
    read_line(p, "engine_pack", m.engine_pack);
    read_line(p, "engine_unpack", m.engine_unpack);
    read_line(p, "mpi_pack", m.mpi_pack);
    read_line(p, "mpi_unpack", m.mpi_unpack);
    read_line(p, "mpi_p2p", m.mpi_p2p);
    read_line(p, "contig_p2p", m.contig_p2p);
    m.min_bytes = p.value("min_bytes", m.min_bytes);
    if (p.contains("device")) {
      const json& d = p.at("device");
      read_line(d, "kernel_pack", m.device.kernel_pack);
      read_line(d, "kernel_unpack", m.device.kernel_unpack);
      read_line(d, "copy", m.device.copy);
      read_line(d, "mpi_pack", m.device.mpi_pack);
      m.device.measured = true;
    }
  } catch (const json::exception& e) {
    err = e.what();
    return false;
  }
  return true;
}

std::string tune_to_json(const TuneModel& m, const std::string& mpi_library, const std::string& host) {
  const char* pol = m.policy == TuneModel::Policy::Always ? "always" : m.policy == TuneModel::Policy::Never ? "never" : "auto";
  json p = {{"policy", pol},
            {"engine_pack", line_json(m.engine_pack)},
            {"engine_unpack", line_json(m.engine_unpack)},
            {"mpi_pack", line_json(m.mpi_pack)},
            {"mpi_unpack", line_json(m.mpi_unpack)},
            {"mpi_p2p", line_json(m.mpi_p2p)},
            {"contig_p2p", line_json(m.contig_p2p)},
            {"min_bytes", m.min_bytes}};
  if (m.device.measured)
    p["device"] = {{"kernel_pack", line_json(m.device.kernel_pack)},
                   {"kernel_unpack", line_json(m.device.kernel_unpack)},
                   {"copy", line_json(m.device.copy)},
                   {"mpi_pack", line_json(m.device.mpi_pack)}};
  json j = {{"format", "libhier-tune/1"}, {"mpi_library", mpi_library}, {"host", host}, {"p2p", p}};
  return j.dump(2) + "\n";
}

const TuneModel& tune_model() {
  static TuneModel model;
  static std::once_flag once;
  // Read on every point-to-point call: an atomic flag is the fast path (no std::call_once, which
  // is a pthread_once plus thread-local accesses, once the model is read).
  static std::atomic<bool> ready{false};
  if (ready.load(std::memory_order_acquire)) return model;
  std::call_once(once, [] {
    model = builtin_model();
    // One loader for both planners (model/load.hpp): it has already checked the file and warned
    // once if it was rejected; its "dtype" object (libhier-tune/1: "p2p") overrides the built-ins.
    const model::TuneFile& f = model::process();
    if (f.dtype_json.empty()) return;
    TuneModel m = builtin_model();
    std::string err;
    if (apply_tune_object(f.dtype_json, m, err)) {
      m.source = f.source;
      model = m;
      HIER_INFO("dtype", "performance model from HIER_TUNE_FILE=%s", f.source.c_str());
    } else {
      HIER_WARN("dtype", "HIER_TUNE_FILE=%s: %s; using the built-in model", f.source.c_str(), err.c_str());
    }
  });
  ready.store(true, std::memory_order_release);
  return model;
}

}  // namespace hier::dtype
