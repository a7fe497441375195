#include "config/registry.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "util/strings.hpp"

namespace hier::config {
namespace {

using util::lower;
using util::split;
using util::trim;

std::string parse_bool(const std::string& v, bool& out) {
  const std::string l = lower(trim(v));
  if (l == "1" || l == "true" || l == "yes" || l == "on") { out = true; return {}; }
  if (l == "0" || l == "false" || l == "no" || l == "off" || l.empty()) { out = false; return {}; }
  return "not a boolean";
}

// Only %h (host), %p (pid), %r (rank) and %% are expanded in path templates.
std::string check_template(const std::string& v) {
  if (trim(v).empty()) return "empty path";
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != '%') continue;
    if (i + 1 >= v.size() || std::string("hpr%").find(v[i + 1]) == std::string::npos)
      return std::string("unknown escape '%") + (i + 1 < v.size() ? std::string(1, v[i + 1]) : "") + "'";
    ++i;
  }
  return {};
}

std::optional<Coll> coll_from_key(const std::string& key) {
  for (size_t i = 0; i < kCollKeys.size(); ++i)
    if (key == kCollKeys[i]) return static_cast<Coll>(i);
  return std::nullopt;
}

// Parses "value" (applies to every collective) or "coll=value,coll=value".
template <class T>
std::string parse_per_coll(const std::string& v, std::array<T, static_cast<size_t>(Coll::Count)>& out,
                           std::optional<T> (*one)(const std::string&), const char* what) {
  const std::string s = lower(trim(v));
  if (s.find('=') == std::string::npos) {
    auto x = one(s);
    if (!x) return "unknown " + std::string(what) + " '" + s + "'";
    out.fill(*x);
    return {};
  }
  auto tmp = out;
  for (const std::string& item : split(s, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) return "'" + item + "' is not collective=" + what;
    const std::string key = trim(item.substr(0, eq)), val = trim(item.substr(eq + 1));
    auto c = coll_from_key(key);
    if (!c) return "unknown collective '" + key + "'";
    auto x = one(val);
    if (!x) return "unknown " + std::string(what) + " '" + val + "' for " + key;
    tmp[static_cast<size_t>(*c)] = *x;
  }
  out = tmp;
  return {};
}

std::optional<Algo> algo_from(const std::string& s) {
  if (s == "auto") return Algo::Auto;
  if (s == "flat") return Algo::Flat;
  if (s == "hier") return Algo::Hier;
  return std::nullopt;
}
std::optional<Quant> quant_from(const std::string& s) {
  if (s == "off" || s == "none" || s == "0") return Quant::Off;
  if (s == "int8") return Quant::Int8;
  if (s == "int4") return Quant::Int4;
  return std::nullopt;
}

std::string apply_levels(const std::string& v, Config& c) {
  const std::string s = lower(trim(v));
  if (s == "auto" || s.empty()) { c.levels_auto = true; c.levels.clear(); return {}; }
  std::vector<Level> levels;
  for (const std::string& item : split(s, ',')) {
    Level l;
    const auto colon = item.find(':');
    l.name = trim(item.substr(0, colon));
    if (l.name.empty() || !std::isalpha(static_cast<unsigned char>(l.name[0])) ||
        !std::all_of(l.name.begin(), l.name.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }))
      return "bad level name '" + l.name + "'";
    if (l.name == "world") return "'world' is implicit (the outermost level); do not list it";
    if (colon != std::string::npos) {
      const std::string n = trim(item.substr(colon + 1));
      char* end = nullptr;
      const long x = std::strtol(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || x < 1 || x > (1 << 20)) return "bad size '" + n + "' for level " + l.name;
      l.size = static_cast<int>(x);
    }
    for (const Level& prev : levels)
      if (prev.name == l.name) return "level '" + l.name + "' listed twice";
    levels.push_back(l);
  }
  // Sized levels must nest: each size a multiple of the sized level inside it.
  int inner = 0;
  for (const Level& l : levels) {
    if (l.size == 0) continue;
    if (inner && (l.size <= inner || l.size % inner != 0))
      return "level " + l.name + ":" + std::to_string(l.size) + " is not a multiple of the level inside it (" +
             std::to_string(inner) + ")";
    inner = l.size;
  }
  c.levels_auto = false;
  c.levels = std::move(levels);
  return {};
}

std::string apply_debug(const std::string& v, Config& c) {
  const std::string s = lower(trim(v));
  if (s == "none" || s == "off") c.debug = LogLevel::None;
  else if (s == "warn" || s.empty()) c.debug = LogLevel::Warn;
  else if (s == "info") c.debug = LogLevel::Info;
  else if (s == "trace") c.debug = LogLevel::Trace;
  else return "unknown level";
  return {};
}

// A byte size: digits with an optional k/m/g suffix (powers of 1024; "KiB", "MB" and the like
// are read the same way).
std::string parse_size(const std::string& s, int64_t& out) {
  char* end = nullptr;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || x < 0) return "not a size in bytes";
  std::string unit = trim(end);
  if (unit.size() > 1 && (unit.substr(1) == "b" || unit.substr(1) == "ib")) unit.resize(1);
  long long mult = 1;
  for (const SizeUnit& u : kSizeUnits)
    if (unit == u.suffix) mult = u.bytes;
  if (mult == 1 && !unit.empty() && unit != "b") return "unknown size unit '" + unit + "'";
  if (x > (1LL << 40) / mult) return "size too large";
  out = x * mult;
  return {};
}

// A byte size, "0"/"off" (no pipelining) or "auto".
std::string apply_chunk(const std::string& v, Config& c) {
  std::string s = lower(trim(v));
  if (s == "auto" || s.empty()) { c.chunk_bytes = -1; return {}; }
  if (s == "off") { c.chunk_bytes = 0; return {}; }
  return parse_size(s, c.chunk_bytes);
}

// on (a cap of 256 MiB), off, or the cap itself as a size with a unit (64m).
std::string apply_quant_feedback(const std::string& v, Config& c) {
  const std::string s = lower(trim(v));
  bool b = false;
  if (parse_bool(s, b).empty()) { c.quant_feedback_cap = b ? int64_t{256} << 20 : 0; return {}; }
  return parse_size(s, c.quant_feedback_cap);
}

// on (every call), off, or N: every Nth quantized call per communicator and collective.
std::string apply_quant_check(const std::string& v, Config& c) {
  const std::string s = lower(trim(v));
  bool b = false;
  if (parse_bool(s, b).empty()) { c.quant_check_every = b ? 1 : 0; return {}; }
  char* end = nullptr;
  const long x = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || x < 1 || x > (1 << 30)) return "not on, off or a number of calls >= 1";
  c.quant_check_every = static_cast<int>(x);
  return {};
}

// A power of two from 32 to 4096 values: a multiple of 8 as the record format needs
// (quant/format.hpp); below 32 the scales cost 12.5% of the int8 payload and more, above 4096 one
// large value coarsens the rounding of thousands of others.
std::string apply_quant_block(const std::string& v, Config& c) {
  const std::string s = trim(v);
  char* end = nullptr;
  const long x = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || x < 32 || x > 4096 || (x & (x - 1)) != 0) return "not a power of two from 32 to 4096";
  c.quant_block = x;
  return {};
}

std::string apply_flight(const std::string& v, Config& c) {
  const std::string s = trim(v);
  char* end = nullptr;
  const long x = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || x < 0 || x > 4096) return "not a number of calls from 0 to 4096";
  c.flight = static_cast<int>(x);
  return {};
}

std::string apply_watchdog(const std::string& v, Config& c) {
  const std::string s = trim(v);
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  // A floor: below a tenth of a second every collective of a loaded machine would be a "hang",
  // and 1e-300 would round to a limit of 0 ns.
  if (s.empty() || *end != '\0' || !(x >= 0) || x > 1e7) return "not a number of seconds";
  if (x > 0 && x < 0.1) return "below the floor of 0.1 s";
  c.watchdog_s = x;
  return {};
}

// HIER_ALGO's allowed values name every collective of the table (config/collectives.def).
const char* algo_allowed() {
  static const std::string s = [] {
    std::string out = "auto|flat|hier, or collective=auto|flat|hier,... (collectives: ";
    for (size_t i = 0; i < kCollKeys.size(); ++i) out += (i ? ", " : "") + std::string(kCollKeys[i]);
    return out + ")";
  }();
  return s.c_str();
}

const VarSpec kVars[] = {
  {"HIER_DISABLE", "0", "0 or 1", "Pure passthrough: every call goes straight to the MPI library (the baseline for comparisons).",
   [](const std::string& v, Config& c) { return parse_bool(v, c.disable); }, true},
  {"HIER_STRICT", "0", "0 or 1", "Turn an invalid HIER_* value into a clean stop (MPI_Abort with the message) instead of a warning.",
   [](const std::string& v, Config& c) { return parse_bool(v, c.strict); }},
  {"HIER_LEVELS", "auto", "auto, or a list name[:N],... innermost first (e.g. gpu:2,node:4)",
   "Hierarchy levels: auto-detected, or listed innermost first; name:N groups N consecutive ranks (node:N fakes nodes).",
   apply_levels, true},
  {"HIER_GPU_AWARE", "auto", "auto, 0 or 1",
   "Whether the MPI accepts GPU device pointers (auto: asked through MPIX_GPU_query_support / MPIX_Query_cuda_support / MPIX_Query_rocm_support; none of them = no). If not, libhier copies device buffers of collectives, point-to-point calls and MPI_Pack/MPI_Unpack to host memory through the GPU runtime, so they work on an MPI that is not GPU-aware; where every rank with a runtime has the GPU module, the collectives' schedules run on the device buffers instead and only each message step's bytes are staged through pinned host memory (docs/device-buffers.md). Must be the same on every rank.",
   [](const std::string& v, Config& c) {
     const std::string s = lower(trim(v));
     if (s == "auto" || s.empty()) { c.gpu_aware = -1; return std::string(); }
     bool b = false;
     std::string err = parse_bool(s, b);
     if (err.empty()) c.gpu_aware = b ? 1 : 0;
     return err;
   }, true},
  {"HIER_GPU_MODULE", "auto", "auto, off, or the path of a libhier GPU module",
   "The GPU module whose kernels pack and unpack device buffers in MPI_Pack/MPI_Unpack and in non-contiguous MPI_Send/MPI_Isend/MPI_Recv/MPI_Irecv/MPI_Sendrecv/MPI_Sendrecv_replace (and their _c forms) and, on a GPU-aware MPI where every rank with a GPU runtime has the module, run the local steps of libhier's collective schedules on device buffers, on an MPI that is not GPU-aware too (its message steps then staged through pinned host memory) (auto: libhier-cuda.so or libhier-hip.so beside libhier.so, for the runtime the program loaded; off: none, device buffers are copied whole through host memory, and a GPU-aware MPI gets the collectives of device buffers; a path: that module). Loaded only once a GPU runtime is in the process (docs/device-buffers.md).",
   [](const std::string& v, Config& c) {
     const std::string s = trim(v);
     if (s.empty()) return std::string("empty value");
     const std::string l = lower(s);
     c.gpu_module = l == "auto" || l == "off" ? l : s;
     return std::string();
   }},  // a local choice: the packed bytes are the same either way, and the collectives agree on
        // which ranks have a module with their levels (exec/context.cpp)
  {"HIER_ALGO", "auto", algo_allowed(),
   "Algorithm per collective; auto lets the planner choose.",
   [](const std::string& v, Config& c) { return parse_per_coll<Algo>(v, c.algo, algo_from, "algorithm"); }, true},
  {"HIER_CHUNK", "auto", "auto, off (0), or a size in bytes with an optional k/m/g suffix (e.g. 4m)",
   "Pipeline chunk size: hierarchical allreduce and bcast, and quantized allreduce and reduce_scatter_block (HIER_QUANT; cut at HIER_QUANT_BLOCK boundaries), larger than this are cut into chunks whose level steps overlap (auto: the measured default for this MPI). Must be the same on every rank.",
   apply_chunk, true},
  {"HIER_QUANT", "off", "off|int8|int4, or collective=off|int8|int4,...",
   "Lossy blockwise quantization of the traffic that crosses the slowest level: MPI_Allreduce and MPI_Reduce_scatter(_block) (float/double MPI_SUM), and MPI_Allgather (float/double, and MPICH's MPIX_C_FLOAT16) when named (allgather=int8), on cartesian 2-level shapes where the planner predicts it faster (HIER_ALGO=hier: always), from one block per rank (docs/quantization.md); everything else stays exact.",
   [](const std::string& v, Config& c) {
     const std::string err = parse_per_coll<Quant>(v, c.quant, quant_from, "quantization");
     // A plain value leaves MPI_Allgather exact: only a type signature is equal across ranks
     // there, so libhier's choice (taken from the receive type) could differ between ranks that
     // pass equal signatures in different types; it is quantized only when named (and then every
     // rank must pass MPI_FLOAT or MPI_DOUBLE: docs/quantization.md).
     if (err.empty() && lower(trim(v)).find('=') == std::string::npos)
       c.quant[static_cast<size_t>(Coll::Allgather)] = Quant::Off;
     return err;
   }, true},
  {"HIER_QUANT_FEEDBACK", "off", "on, off, or the cap as a size with a k/m/g suffix (on = 256m)",
   "Error feedback for quantized calls: each call site (communicator, buffer, count) keeps its quantization residual and adds it to its next call, within this many bytes per process (docs/quantization.md).",
   apply_quant_feedback},
  {"HIER_QUANT_CHECK", "off", "on, off, or N (every Nth quantized call)",
   "Also compute the exact result of quantized calls (through the MPI) and report the largest absolute and relative error per call site.",
   apply_quant_check, true},
  {"HIER_QUANT_BLOCK", "512", "a power of two from 32 to 4096",
   "Values per quantization block (one float32 scale each) of quantized calls: smaller blocks bound the error tighter and send more scale bytes (docs/quantization.md). Must be the same on every rank.",
   apply_quant_block, true},
  {"HIER_DEBUG", "WARN", "NONE, WARN, INFO or TRACE", "Log level of libhier's messages (TRACE prints schedules).", apply_debug},
  {"HIER_DEBUG_FILE", "", "a path; %h host, %p pid, %r rank, %% a percent sign",
   "Write the log to this file per process instead of stderr.",
   [](const std::string& v, Config& c) { auto e = check_template(v); if (e.empty()) c.debug_file = v; return e; }},
  {"HIER_REPORT", "", "a path; %h host, %p pid, %r rank, %% a percent sign",
   "Write a JSON report per rank at MPI_Finalize (calls, bytes and algorithm per MPI function).",
   [](const std::string& v, Config& c) { auto e = check_template(v); if (e.empty()) c.report = v; return e; }},
  {"HIER_TRACE", "", "a path; %h host, %p pid, %r rank, %% a percent sign",
   "Write a timeline per rank at MPI_Finalize in Chrome trace-event JSON: each collective, its schedule's steps (level, bytes, transport, kernel time) and nonblocking calls from start to completion; `hier-report --trace` merges the ranks' files into one for Perfetto or chrome://tracing (docs/diagnostics.md). Set on every rank or on none.",
   [](const std::string& v, Config& c) { auto e = check_template(v); if (e.empty()) c.trace = v; return e; }, true},
  {"HIER_WATCHDOG", "0", "0 (off) or a number of seconds from 0.1 to 1e7",
   "Seconds a collective (blocking, or a nonblocking or persistent one waited for) may wait before one hang report names the ranks missing from it and where they are (docs/diagnostics.md). Must be the same on every rank.",
   apply_watchdog, true},
  {"HIER_WATCHDOG_IF", "", "empty (auto), or the name of a network interface (at most 15 characters)",
   "The interface whose IPv4 addresses the watchdog's side channel listens on (docs/diagnostics.md); empty: the interfaces whose subnets hold the other nodes' addresses (else the one the kernel routes to them), loopback only when every rank is on one host.",
   [](const std::string& v, Config& c) {
     const std::string s = trim(v);
     if (s.size() > 15) return std::string("longer than an interface name (15 characters)");
     for (const char ch : s)
       if (ch == '/' || ch == ':' || std::isspace(static_cast<unsigned char>(ch)) || !std::isprint(static_cast<unsigned char>(ch)))
         return std::string("not an interface name");
     c.watchdog_if = s;
     return std::string();
   }},  // a local choice: interface names differ between nodes
  {"HIER_FLIGHT", "64", "0 (off) or a number of calls from 1 to 4096",
   "Flight recorder: each thread keeps its last this many collective calls (call, communicator, sequence number, count, bytes, call site, state); the hang report shows every reachable rank's and the first call at which the ranks disagree (docs/diagnostics.md).",
   apply_flight},
  {"HIER_TUNE_FILE", "", "a path to a JSON file written by hier-tune",
   "Machine model (libhier-tune/2, docs/tune-file.md) for the collectives planner and the datatype engine; the built-in model of the MPI family when unset.",
   [](const std::string& v, Config& c) { if (trim(v).empty()) return std::string("empty path"); c.tune_file = v; return std::string(); },
   false},  // paths may differ (node-local copies): the contents loaded are compared (core/agree_config.cpp)
  {"HIER_SHM", "auto", "off, auto or on",
   "Level steps inside a node (reduce-scatter, allreduce, allgather(v), bcast, reduce, barrier) through a shared-memory segment per level communicator whose members share memory, instead of MPI messages (docs/shm.md); auto: only in the schedules the model predicts faster that way (from hier-tune's measured segment, the tune file's shm section; built-in rates without one); on: every such step, wherever every rank could map the segment; off: messages only. Must be the same on every rank.",
   [](const std::string& v, Config& c) {
     const std::string s = lower(trim(v));
     if (s == "off" || s == "0") c.shm = ShmMode::Off;
     else if (s == "auto" || s.empty()) c.shm = ShmMode::Auto;
     else if (s == "on" || s == "1") c.shm = ShmMode::On;
     else return std::string("not off, auto or on");
     return std::string();
   }, true},
  {"HIER_SHM_CMA", "auto", "off, auto or on",
   "With HIER_SHM: large reduce-scatter, allgather(v), bcast and reduce steps read the peers' buffers directly (single copy, process_vm_readv; the reduce writes its sums into the root's with process_vm_writev) instead of copying through the segment, where every member of the level may (same user, ptrace allowed: tried when the segment is built); auto: where the model predicts it faster than copy-in (from hier-tune's measured shm.single_ns_per_byte; without it, never); on: wherever allowed; off: never (docs/shm.md). Must be the same on every rank.",
   [](const std::string& v, Config& c) {
     const std::string s = lower(trim(v));
     if (s == "auto" || s.empty()) c.shm_cma = ShmCma::Auto;
     else if (s == "on" || s == "1") c.shm_cma = ShmCma::On;
     else if (s == "off" || s == "0") c.shm_cma = ShmCma::Off;
     else return std::string("not off, auto or on");
     return std::string();
   }, true},
  {"HIER_PROGRESS", "off", "off, thread or thread+mpi",
   "Who advances libhier's nonblocking collectives: off = the program's MPI calls (MPI_Wait/MPI_Test, ...); thread = also a progress thread, which needs MPI_THREAD_MULTIPLE (otherwise a warning and off); thread+mpi = the thread also advances the nonblocking collectives libhier leaves to the MPI (one MPI progress call every 4 ms while one is outstanding and no program thread waits).",
   [](const std::string& v, Config& c) {
     const std::string s = lower(trim(v));
     c.progress_mpi = false;
     if (s == "off" || s.empty()) { c.progress_thread = false; return std::string(); }
     if (s == "thread") { c.progress_thread = true; return std::string(); }
     if (s == "thread+mpi") { c.progress_thread = c.progress_mpi = true; return std::string(); }
     return std::string("unknown progress mode");
   }},
};

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::span<const VarSpec> registry() { return kVars; }

const VarSpec* find_var(const std::string& name) {
  for (const VarSpec& v : kVars)
    if (name == v.name) return &v;
  return nullptr;
}

std::optional<std::string> closest_var(const std::string& name) {
  const VarSpec* best = nullptr;
  size_t best_d = 3;  // more than 2 edits is a different word, not a typo
  for (const VarSpec& v : kVars) {
    const size_t d = edit_distance(name, v.name);
    if (d < best_d) { best_d = d; best = &v; }
  }
  if (!best) return std::nullopt;
  return std::string(best->name);
}

std::string markdown_table() {
  // A '|' inside a cell would end it: escape them.
  auto cell = [](std::string t) {
    for (size_t p = 0; (p = t.find('|', p)) != std::string::npos; p += 2) t.replace(p, 1, "\\|");
    return t;
  };
  std::ostringstream o;
  o << "| variable | default | allowed | meaning |\n|---|---|---|---|\n";
  for (const VarSpec& v : kVars)
    o << "| `" << v.name << "` | " << (*v.default_value ? "`" + std::string(v.default_value) + "`" : "(unset)") << " | "
      << cell(v.allowed) << " | " << cell(v.doc) << " |\n";
  return o.str();
}

}  // namespace hier::config
