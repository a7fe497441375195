// The tune file's schema, both ways (tune_schema.hpp): the reader (parse, with its checks: every
// value is checked before it is cast or used) and the writer (write) side by side, so that a key
// is spelt once for both.
#include "model/tune_schema.hpp"

#include <climits>
#include <cmath>
#include <utility>
#include <nlohmann/json.hpp>

#include "util/files.hpp"

namespace hier::model {
namespace {

using json = nlohmann::json;

// A problem in the file: what() is the one line the user sees.
struct Bad {
  std::string what;
};

const json& need(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw Bad{"missing " + where + key};
  return j.at(key);
}

double number(const json& j, const char* key, const std::string& where, double lo = 0) {
  const json& v = need(j, key, where);
  if (!v.is_number()) throw Bad{where + key + " is not a number"};
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo) throw Bad{where + key + " = " + v.dump() + " (must be >= " + json(lo).dump() + ")"};
  return x;
}

// A count that becomes an int: checked against INT_MAX before the cast (a larger double cast to
// int is undefined behaviour), and whole.
int int_of(const json& j, const char* key, const std::string& where, int lo) {
  const double x = number(j, key, where, lo);
  if (x > static_cast<double>(INT_MAX) || x != std::floor(x))
    throw Bad{where + key + " = " + need(j, key, where).dump() + " (an integer from " + std::to_string(lo) + " to " +
              std::to_string(INT_MAX) + ")"};
  return static_cast<int>(x);
}

// A JSON integer that fits int64_t (an unsigned one above INT64_MAX would wrap negative).
bool is_int64(const json& v) {
  return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX));
}

int64_t bytes_of(const json& j, const char* key, const std::string& where) {
  const json& v = need(j, key, where);
  if (!is_int64(v) || v.get<int64_t>() < 0) throw Bad{where + key + " = " + v.dump() + " (must be an integer >= 0)"};
  return v.get<int64_t>();
}

int coll_index(const std::string& name) {
  for (size_t c = 0; c < kColls; ++c)
    if (name == config::kCollKeys[c]) return static_cast<int>(c);
  return -1;
}

// A list of measured points [{bytes, ns}]: bytes >= 1 ascending, ns >= 0, all finite.
std::vector<Point> read_points(const json& list, const std::string& where) {
  if (!list.is_array()) throw Bad{where + " is not a list"};
  std::vector<Point> pts;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string wi = where + "[" + std::to_string(i) + "].";
    Point p{number(list[i], "bytes", wi, 1), number(list[i], "ns", wi)};
    if (list[i].contains("measured_ns")) p.measured_ns = number(list[i], "measured_ns", wi);
    if (!pts.empty() && p.bytes <= pts.back().bytes) throw Bad{wi + "bytes not ascending"};
    pts.push_back(p);
  }
  return pts;
}

// flat_measured / hier_measured: {"<coll>": [{bytes, ns}], ...}; unknown collectives ignored.
void read_measured(const json& j, const char* key, std::array<std::vector<Point>, kColls>& out) {
  for (auto& v : out) v.clear();
  if (!j.contains(key)) return;
  const json& fm = j.at(key);
  if (!fm.is_object()) throw Bad{std::string(key) + " is not an object"};
  for (const auto& [name, list] : fm.items()) {
    const int c = coll_index(name);
    if (c >= 0) out[static_cast<size_t>(c)] = read_points(list, std::string(key) + "." + name);
  }
}

// levels.X.steps: {"members": m, "<coll>": [{bytes, ns}], ...} for the collectives a level step
// calls (allreduce, allgather, reduce_scatter_block, bcast; other names are ignored). Each list
// is empty or at least two points (the cost code extrapolates above the last with the last
// segment's slope), ascending bytes, finite times.
void read_level_steps(const json& st, const std::string& where, LevelParams& p) {
  if (!st.is_object()) throw Bad{where + " is not an object"};
  const std::string w = where + ".";
  p.step_members = int_of(st, "members", w, 2);
  for (config::Coll c : {config::Coll::Allreduce, config::Coll::Allgather, config::Coll::ReduceScatterBlock,
                         config::Coll::Bcast}) {
    const char* name = config::kCollKeys[static_cast<size_t>(c)];
    if (!st.contains(name)) continue;
    const json& list = st.at(name);
    const std::string wl = w + name;
    std::vector<Point> pts = read_points(list, wl);
    if (pts.size() == 1) throw Bad{wl + " has one point (at least two, or none)"};
    p.steps[static_cast<size_t>(c)] = std::move(pts);
  }
}

LevelParams read_level(const json& j, const std::string& where) {
  LevelParams p;
  p.latency_ns = number(j, "latency_ns", where);
  p.ns_per_byte = number(j, "ns_per_byte", where);
  if (j.contains("concurrent")) {
    const json& c = j.at("concurrent");
    if (!c.is_array()) throw Bad{where + "concurrent is not a list"};
    for (size_t i = 0; i < c.size(); ++i) {
      const std::string w = where + "concurrent[" + std::to_string(i) + "].";
      FlowPoint fp;
      fp.flows = int_of(c[i], "flows", w, 1);
      fp.ns_per_byte = number(c[i], "ns_per_byte", w);
      if (!p.concurrent.empty() && fp.flows <= p.concurrent.back().flows) throw Bad{w + "flows not ascending"};
      p.concurrent.push_back(fp);
    }
  }
  // Optional (hier-tune 3): measured message times at a ladder of sizes; files without it keep
  // the latency + bandwidth line above.
  if (j.contains("ladder")) {
    const json& l = j.at("ladder");
    const std::string w = where + "ladder.";
    if (!l.is_object()) throw Bad{where + "ladder is not an object"};
    p.ladder_flows = int_of(l, "flows", w, 1);
    const json& pts = need(l, "points", w);
    if (!pts.is_array() || pts.empty()) throw Bad{w + "points is not a non-empty list"};
    for (size_t i = 0; i < pts.size(); ++i) {
      const std::string wi = w + "points[" + std::to_string(i) + "].";
      LadderPoint lp{number(pts[i], "bytes", wi), number(pts[i], "ns", wi), 0};
      lp.ns_all = pts[i].contains("ns_all") ? number(pts[i], "ns_all", wi) : lp.ns;
      if (!p.ladder.empty() && lp.bytes <= p.ladder.back().bytes) throw Bad{wi + "bytes not ascending"};
      p.ladder.push_back(lp);
    }
  }
  // Optional (hier-tune 4): the MPI's own collectives measured on this level's communicators,
  // every one of them at once ("Measured level steps", docs/model.md); the file's own, never the
  // base model's (p starts empty).
  if (j.contains("steps")) read_level_steps(j.at("steps"), where + "steps", p);
  return p;
}

// The datatype engine's object (libhier-tune/1 "p2p", libhier-tune/2 "dtype"): checked here so
// that dtype/tune.cpp can apply it without failing.
void check_dtype(const json& d, const std::string& where) {
  if (!d.is_object()) throw Bad{where + " is not an object"};
  if (d.contains("policy")) {
    const json& p = d.at("policy");
    const std::string pol = p.is_string() ? p.get<std::string>() : p.dump();
    if (pol != "auto" && pol != "always" && pol != "never")
      throw Bad{where + ".policy '" + pol + "' (allowed: auto, always, never)"};
  }
  for (const char* line : {"engine_pack", "engine_unpack", "mpi_pack", "mpi_unpack", "mpi_p2p", "contig_p2p"}) {
    if (!d.contains(line)) continue;
    const std::string w = where + "." + line + ".";
    if (!d.at(line).is_object()) throw Bad{where + "." + line + " is not an object"};
    for (const char* k : {"overhead_ns", "ns_per_byte", "ns_per_block"})
      if (d.at(line).contains(k)) number(d.at(line), k, w, -1e300);
  }
  if (d.contains("min_bytes") && !d.at("min_bytes").is_number_integer()) throw Bad{where + ".min_bytes is not an integer"};
  if (d.contains("device")) {  // the device rates (dtype/tune.hpp TuneModel::Device)
    const json& dev = d.at("device");
    if (!dev.is_object()) throw Bad{where + ".device is not an object"};
    for (const char* line : {"kernel_pack", "kernel_unpack", "copy", "mpi_pack"}) {
      if (!dev.contains(line)) continue;
      if (!dev.at(line).is_object()) throw Bad{where + ".device." + line + " is not an object"};
      for (const char* k : {"overhead_ns", "ns_per_byte", "ns_per_block"})
        if (dev.at(line).contains(k)) number(dev.at(line), k, where + ".device." + line + ".", -1e300);
    }
  }
}

// The GPU module's rates (model/device_rates.hpp): every figure required inside the section
// (hier-tune writes them together); a file without the section keeps the base's built-ins.
void read_device(const json& d, DeviceRates& r) {
  if (!d.is_object()) throw Bad{"device is not an object"};
  r.step_ns = number(d, "step_ns", "device.");
  r.copy_ns_per_byte = number(d, "copy_ns_per_byte", "device.");
  r.h2d_ns_per_byte = number(d, "h2d_ns_per_byte", "device.");
  r.d2h_ns_per_byte = number(d, "d2h_ns_per_byte", "device.");
  r.reduce_ns_per_byte = number(d, "reduce_ns_per_byte", "device.");
  for (const auto& [name, bits] : {std::pair{"int8", 8}, std::pair{"int4", 4}}) {
    const json& f = need(d, name, "device.");
    const std::string w = std::string("device.") + name + ".";
    r.q(bits) = {number(f, "quantize_ns_per_byte", w), number(f, "dequantize_ns_per_byte", w),
                 number(f, "dequantize_add_ns_per_byte", w)};
  }
  r.measured = d.value("measured", false);
  r.module = d.value("module", std::string());
  r.device = d.value("name", std::string());
}

// The quantization kernels' rates (docs/tune-file.md), all optional: a missing figure keeps the
// base model's. The one-figure keys of older files (compute.quantize_ns_per_byte /
// dequantize_ns_per_byte: "dequantize (+ add)") set both formats and both dequantizations; the
// per-format figures of compute.quant.int8 / .int4 (hier-tune's) then override them.
void read_quant(const json& cp, Model& m) {
  for (int bits : {8, 4}) {
    QuantRates& r = m.quant(bits);
    if (cp.contains("quantize_ns_per_byte")) r.quantize_ns_per_byte = number(cp, "quantize_ns_per_byte", "compute.");
    if (cp.contains("dequantize_ns_per_byte"))
      r.dequantize_ns_per_byte = r.dequantize_add_ns_per_byte = number(cp, "dequantize_ns_per_byte", "compute.");
  }
  if (!cp.contains("quant")) return;
  const json& q = cp.at("quant");
  if (!q.is_object()) throw Bad{"compute.quant is not an object"};
  if (q.contains("block")) number(q, "block", "compute.quant.", 1);  // where it was measured: not applied
  for (int bits : {8, 4}) {
    const char* name = bits == 8 ? "int8" : "int4";
    if (!q.contains(name)) continue;
    const json& f = q.at(name);
    const std::string w = std::string("compute.quant.") + name + ".";
    if (!f.is_object()) throw Bad{"compute.quant." + std::string(name) + " is not an object"};
    QuantRates& r = m.quant(bits);
    if (f.contains("quantize_ns_per_byte")) r.quantize_ns_per_byte = number(f, "quantize_ns_per_byte", w);
    if (f.contains("dequantize_ns_per_byte")) r.dequantize_ns_per_byte = number(f, "dequantize_ns_per_byte", w);
    if (f.contains("dequantize_add_ns_per_byte"))
      r.dequantize_add_ns_per_byte = number(f, "dequantize_add_ns_per_byte", w);
  }
}

void read_v2(const json& j, Family family, const JobShape& job, TuneFile& out) {
  Model& m = out.model;
  const json& mach = need(j, "machine", "");
  const json& fam = need(mach, "mpi_family", "machine.");
  if (!fam.is_string() || (fam != "openmpi" && fam != "mpich"))
    throw Bad{"machine.mpi_family = " + fam.dump() + " (allowed: \"openmpi\", \"mpich\")"};
  if (fam.get<std::string>() != to_string(family))
    throw Bad{"measured with " + fam.get<std::string>() + ", this libhier is built for " + to_string(family)};
  m.family = family;
  m.scatterv_sequential = family == Family::OpenMPI;
  m.nodes = int_of(mach, "nodes", "machine.", 1);
  m.ranks_per_node = int_of(mach, "ranks_per_node", "machine.", 1);
  if (job.nodes > 0 && (job.nodes != m.nodes || job.ranks_per_node != m.ranks_per_node))
    throw Bad{"measured on " + std::to_string(m.nodes) + " nodes x " + std::to_string(m.ranks_per_node) +
              " ranks, this job runs " + std::to_string(job.nodes) + " x " + std::to_string(job.ranks_per_node)};
  const json& lv = need(j, "levels", "");
  m.intra = read_level(need(lv, "intra", "levels."), "levels.intra.");
  // A file measured on one node (hier-tune there has no link to measure) states only the intra
  // level; the inter level then keeps the base model's figures (docs/tune-file.md). A file of a
  // multi-node job must state both: it is what the planner's cross-node choices rest on.
  if (lv.contains("inter")) m.inter = read_level(lv.at("inter"), "levels.inter.");
  else if (m.nodes > 1) throw Bad{"levels.inter missing (required when machine.nodes > 1)"};
  const json& cp = need(j, "compute", "");
  m.reduce_ns_per_byte = number(cp, "reduce_ns_per_byte", "compute.");
  m.copy_ns_per_byte = number(cp, "copy_ns_per_byte", "compute.");
  read_quant(cp, m);

  if (j.contains("flat_algorithms")) {
    const json& fa = j.at("flat_algorithms");
    if (!fa.is_object()) throw Bad{"flat_algorithms is not an object"};
    for (const auto& [name, list] : fa.items()) {
      const int c = coll_index(name);
      if (c < 0) continue;  // a collective this version does not plan
      const std::string w = "flat_algorithms." + name;
      if (!list.is_array() || list.empty()) throw Bad{w + " is not a non-empty list"};
      std::vector<AlgoRule> rules;
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string wi = w + "[" + std::to_string(i) + "].";
        AlgoRule r;
        const json& a = need(list[i], "algorithm", wi);
        if (!a.is_string() || !algo_from_string(a.get<std::string>(), r.algo))
          throw Bad{wi + "algorithm = " + a.dump() + " (see docs/tune-file.md)"};
        if (list[i].contains("below_bytes")) r.below_bytes = bytes_of(list[i], "below_bytes", wi);
        rules.push_back(r);
      }
      m.flat_algorithms[static_cast<size_t>(c)] = std::move(rules);
    }
  }
  // Measured points are the file's own, never the base's (they belong to the file's machine).
  read_measured(j, "flat_measured", m.flat_measured);
  read_measured(j, "hier_measured", m.hier_measured);
  read_measured(j, "flat_measured_nonblocking", m.flat_measured_nb);
  read_measured(j, "hier_measured_nonblocking", m.hier_measured_nb);
  if (j.contains("shm")) {
    const json& sh = j.at("shm");
    if (!sh.is_object()) throw Bad{"shm is not an object"};
    m.shm.copy_ns_per_byte = number(sh, "copy_ns_per_byte", "shm.");
    m.shm.reduce_ns_per_byte = number(sh, "reduce_ns_per_byte", "shm.");
    m.shm.round_ns = number(sh, "round_ns", "shm.");
    m.shm.members = int_of(sh, "members", "shm.", 2);
    if (sh.contains("single_ns_per_byte")) m.shm.single_ns_per_byte = number(sh, "single_ns_per_byte", "shm.");
  }
  if (j.contains("device")) read_device(j.at("device"), m.device);
  if (j.contains("planner")) {
    const json& p = j.at("planner");
    if (p.contains("margin")) m.margin = number(p, "margin", "planner.");
    if (p.contains("step_overhead_ns")) m.step_overhead_ns = number(p, "step_overhead_ns", "planner.");
  }
  if (j.contains("pipeline")) {
    const json& p = j.at("pipeline");
    if (p.contains("overlap")) {
      m.overlap = number(p, "overlap", "pipeline.");
      if (m.overlap > 1) throw Bad{"pipeline.overlap above 1"};
    }
    if (p.contains("chunk_bytes")) {
      // Per collective; a plain list (the first draft of the format) serves every pipelined row.
      json cb = p.at("chunk_bytes");
      if (cb.is_array()) {
        json per = json::object();
        for (size_t c = 0; c < kColls; ++c)
          if (config::pipelined(static_cast<config::Coll>(c))) per[config::kCollKeys[c]] = cb;
        cb = per;
      }
      if (!cb.is_object()) throw Bad{"pipeline.chunk_bytes is not an object of lists"};
      for (const auto& [name, c] : cb.items()) {
        const int ci = coll_index(name);
        if (ci < 0) continue;
        if (!c.is_array()) throw Bad{"pipeline.chunk_bytes." + name + " is not a list"};
        std::vector<int64_t>& v = m.chunk_bytes[static_cast<size_t>(ci)];
        v.clear();
        for (const json& x : c) {
          if (!is_int64(x) || x.get<int64_t>() <= 0)
            throw Bad{"pipeline.chunk_bytes." + name + ": " + x.dump() + " (sizes > 0)"};
          v.push_back(x.get<int64_t>());
        }
      }
    }
  }
  if (j.contains("steps")) {
    const json& s = j.at("steps");
    if (s.contains("direct_reduce_scatter_from")) m.direct_rs_from = bytes_of(s, "direct_reduce_scatter_from", "steps.");
    if (s.contains("padded_allgatherv_from")) m.padded_agv_from = bytes_of(s, "padded_allgatherv_from", "steps.");
    if (s.contains("eager_bytes")) m.eager_bytes = bytes_of(s, "eager_bytes", "steps.");
    if (s.contains("scatterv_sequential")) {
      if (!s.at("scatterv_sequential").is_boolean()) throw Bad{"steps.scatterv_sequential is not true or false"};
      m.scatterv_sequential = s.at("scatterv_sequential").get<bool>();
    }
  }
  if (j.contains("dtype")) {
    check_dtype(j.at("dtype"), "dtype");
    out.dtype_json = j.at("dtype").dump();
  }
}

}  // namespace

bool parse(const std::string& text, Family family, const JobShape& job, const Model& base, TuneFile& out,
           std::string& err) {
  out = TuneFile{};
  out.model = base;
  // The parser recurses once per nesting level: a deeply nested file must not exhaust the stack.
  if (util::json_nesting_depth(text) > kMaxTuneDepth) {
    err = "nested deeper than " + std::to_string(kMaxTuneDepth) + " levels";
    return false;
  }
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    err = "not a JSON object";
    return false;
  }
  const json fmt = j.contains("format") ? j.at("format") : json();
  try {
    if (fmt == "libhier-tune/1") {
      // The datatype model of earlier versions: the collectives keep the built-in model.
      if (j.contains("p2p")) {
        check_dtype(j.at("p2p"), "p2p");
        out.dtype_json = j.at("p2p").dump();
      } else {
        json d = j;
        d.erase("format");
        d.erase("mpi_library");
        d.erase("host");
        check_dtype(d, "p2p");
        out.dtype_json = d.dump();
      }
      out.version = 1;
      return true;
    }
    if (fmt != "libhier-tune/2") {
      err = "format is " + (fmt.is_null() ? std::string("missing") : fmt.dump()) + ", not \"libhier-tune/2\"";
      return false;
    }
    read_v2(j, family, job, out);
    out.version = 2;
  } catch (const Bad& b) {
    err = b.what;
    return false;
  } catch (const json::exception& e) {
    err = e.what();
    return false;
  }
  return true;
}

namespace {

// Byte counts as integers where whole (they are, as hier-tune measures them).
json bytes_json(double b) {
  return b == std::floor(b) && b < 9e18 ? json(static_cast<int64_t>(b)) : json(b);
}

json points_json(const std::vector<Point>& pts) {
  json a = json::array();
  for (const Point& p : pts) {
    json e = {{"bytes", bytes_json(p.bytes)}, {"ns", p.ns}};
    if (p.measured_ns >= 0) e["measured_ns"] = p.measured_ns;
    a.push_back(e);
  }
  return a;
}

json measured_json(const std::array<std::vector<Point>, kColls>& m) {
  json o = json::object();
  for (size_t c = 0; c < kColls; ++c)
    if (!m[c].empty()) o[config::kCollKeys[c]] = points_json(m[c]);
  return o;
}

bool any(const std::array<std::vector<Point>, kColls>& m) {
  for (const auto& v : m)
    if (!v.empty()) return true;
  return false;
}

json level_json(const LevelParams& p, const LevelNotes& n) {
  json l = {{"latency_ns", p.latency_ns}, {"ns_per_byte", p.ns_per_byte}};
  if (n.pingpong_latency_ns >= 0) l["pingpong_latency_ns"] = n.pingpong_latency_ns;
  if (n.busy_latency_ns >= 0) l["busy_latency_ns"] = n.busy_latency_ns;
  if (!p.concurrent.empty()) {
    json c = json::array();
    for (const FlowPoint& f : p.concurrent) c.push_back({{"flows", f.flows}, {"ns_per_byte", f.ns_per_byte}});
    l["concurrent"] = c;
  }
  if (!p.ladder.empty()) {
    json pts = json::array();
    for (const LadderPoint& x : p.ladder) pts.push_back({{"bytes", bytes_json(x.bytes)}, {"ns", x.ns}, {"ns_all", x.ns_all}});
    l["ladder"] = {{"flows", p.ladder_flows}, {"points", pts}};
  }
  if (p.step_members > 0) {
    json st = {{"members", p.step_members}};
    for (size_t c = 0; c < kColls; ++c)
      if (!p.steps[c].empty()) st[config::kCollKeys[c]] = points_json(p.steps[c]);
    l["steps"] = st;
  }
  return l;
}

json quant_json(const QuantRates& r) {
  return {{"quantize_ns_per_byte", r.quantize_ns_per_byte},
          {"dequantize_ns_per_byte", r.dequantize_ns_per_byte},
          {"dequantize_add_ns_per_byte", r.dequantize_add_ns_per_byte}};
}

}  // namespace

std::string write(const TuneDoc& d) {
  const Model& m = d.model;
  json j = {{"format", "libhier-tune/2"},
            {"machine",
             {{"host", d.machine.host},
              {"mpi_family", to_string(m.family)},
              {"mpi_library", d.machine.mpi_library},
              {"nodes", m.nodes},
              {"ranks_per_node", m.ranks_per_node},
              {"measured", d.machine.measured},
              {"tool", d.machine.tool}}}};
  json levels = json::object();
  if (d.has.intra) levels["intra"] = level_json(m.intra, d.intra_notes);
  if (d.has.inter) levels["inter"] = level_json(m.inter, d.inter_notes);
  j["levels"] = levels;
  json cp = {{"reduce_ns_per_byte", m.reduce_ns_per_byte}, {"copy_ns_per_byte", m.copy_ns_per_byte}};
  json q = {{"int8", quant_json(m.quant(8))}, {"int4", quant_json(m.quant(4))}};
  if (d.quant_block > 0) q["block"] = d.quant_block;
  if (d.quant_bytes > 0) q["bytes"] = d.quant_bytes;
  cp["quant"] = q;
  // The one-figure keys of older files too (int8's quantize and dequantize + add, which such a
  // reader applies to both formats and both dequantizations), for readers without compute.quant.
  cp["quantize_ns_per_byte"] = m.quant(8).quantize_ns_per_byte;
  cp["dequantize_ns_per_byte"] = m.quant(8).dequantize_add_ns_per_byte;
  j["compute"] = cp;
  if (d.has.flat_algorithms) {
    json fa = json::object();
    for (size_t c = 0; c < kColls; ++c) {
      if (m.flat_algorithms[c].empty()) continue;
      json list = json::array();
      for (const AlgoRule& r : m.flat_algorithms[c]) {
        json e = {{"algorithm", to_string(r.algo)}};
        if (r.below_bytes != std::numeric_limits<int64_t>::max()) e["below_bytes"] = r.below_bytes;
        list.push_back(e);
      }
      fa[config::kCollKeys[c]] = list;
    }
    j["flat_algorithms"] = fa;
  }
  if (any(m.flat_measured)) j["flat_measured"] = measured_json(m.flat_measured);
  if (any(m.flat_measured_nb)) j["flat_measured_nonblocking"] = measured_json(m.flat_measured_nb);
  if (d.has.hier_measured) {
    j["hier_measured"] = measured_json(m.hier_measured);
    if (any(m.hier_measured_nb)) j["hier_measured_nonblocking"] = measured_json(m.hier_measured_nb);
  }
  if (d.has.margin || d.has.step_overhead) {
    json p = json::object();
    if (d.has.margin) p["margin"] = m.margin;
    if (d.has.step_overhead) p["step_overhead_ns"] = m.step_overhead_ns;
    j["planner"] = p;
  }
  if (d.has.pipeline) {
    json cb = json::object();
    for (size_t c = 0; c < kColls; ++c)
      if (config::pipelined(static_cast<config::Coll>(c))) cb[config::kCollKeys[c]] = m.chunk_bytes[c];
    j["pipeline"] = {{"overlap", m.overlap}, {"chunk_bytes", cb}};
  }
  if (d.has.steps)
    j["steps"] = {{"direct_reduce_scatter_from", m.direct_rs_from},
                  {"padded_allgatherv_from", m.padded_agv_from},
                  {"scatterv_sequential", m.scatterv_sequential}};
  if (d.has.steps && m.eager_bytes > 0) j["steps"]["eager_bytes"] = m.eager_bytes;
  if (d.has.shm)
    j["shm"] = {{"copy_ns_per_byte", m.shm.copy_ns_per_byte},
                {"reduce_ns_per_byte", m.shm.reduce_ns_per_byte},
                {"round_ns", m.shm.round_ns},
                {"members", m.shm.members}};
  if (d.has.shm && m.shm.single_ns_per_byte >= 0) j["shm"]["single_ns_per_byte"] = m.shm.single_ns_per_byte;
  if (d.has.device) {
    const DeviceRates& r = m.device;
    j["device"] = {{"module", r.module}, {"name", r.device}, {"measured", r.measured}, {"step_ns", r.step_ns},
                   {"copy_ns_per_byte", r.copy_ns_per_byte}, {"h2d_ns_per_byte", r.h2d_ns_per_byte},
                   {"d2h_ns_per_byte", r.d2h_ns_per_byte}, {"reduce_ns_per_byte", r.reduce_ns_per_byte}};
    for (int bits : {8, 4})
      j["device"][bits == 8 ? "int8" : "int4"] = {{"quantize_ns_per_byte", r.q(bits).quantize_ns_per_byte},
                                                 {"dequantize_ns_per_byte", r.q(bits).dequantize_ns_per_byte},
                                                 {"dequantize_add_ns_per_byte", r.q(bits).dequantize_add_ns_per_byte}};
  }
  if (!d.dtype_json.empty()) j["dtype"] = json::parse(d.dtype_json);
  return j.dump(2) + "\n";
}

}  // namespace hier::model
