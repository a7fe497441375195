// The parsed HIER_* configuration: read once at init, then read-only.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hier::config {

enum class LogLevel : uint8_t { None, Warn, Info, Trace };

// Collectives that HIER_ALGO / HIER_QUANT can name, from the one table (collectives.def).
enum class Coll : uint8_t {
#define HIER_COLL(name, key, blocking, nonblocking, persistent, ...) name,
#include "config/collectives.def"
  Count
};
inline constexpr std::array<const char*, static_cast<size_t>(Coll::Count)> kCollKeys = {
#define HIER_COLL(name, key, blocking, nonblocking, persistent, ...) #key,
#include "config/collectives.def"
};
inline constexpr const char* coll_key(Coll c) { return kCollKeys[static_cast<size_t>(c)]; }
// The table's Pipelined and Quantized columns.
inline constexpr std::array<bool, static_cast<size_t>(Coll::Count)> kCollPipelined = {
#define HIER_COLL(name, key, blocking, nonblocking, persistent, pipelined, ...) pipelined != 0,
#include "config/collectives.def"
};
inline constexpr std::array<uint8_t, static_cast<size_t>(Coll::Count)> kCollQuantized = {
#define HIER_COLL(name, key, blocking, nonblocking, persistent, pipelined, quantized, ...) quantized,
#include "config/collectives.def"
};
inline constexpr bool pipelined(Coll c) { return kCollPipelined[static_cast<size_t>(c)]; }
// Whether `c` has a quantized schedule, and whether that one is pipelined.
inline constexpr bool quantizable(Coll c) { return kCollQuantized[static_cast<size_t>(c)] > 0; }
inline constexpr bool quant_pipelined(Coll c) { return kCollQuantized[static_cast<size_t>(c)] == 2; }

enum class Algo : uint8_t { Auto, Flat, Hier };
enum class Quant : uint8_t { Off, Int8, Int4 };
// HIER_SHM: level steps through shared memory (docs/shm.md).
enum class ShmMode : uint8_t { Off, Auto, On };
// HIER_SHM_CMA: single-copy segment steps (docs/shm.md): never, where the model prefers them, or
// wherever the kernel allows and the step is large enough.
enum class ShmCma : uint8_t { Off, Auto, On };

// One level of HIER_LEVELS, innermost first. size == 0: detect (hwloc / shared memory).
struct Level {
  std::string name;
  int size = 0;
  bool operator==(const Level&) const = default;
};

struct Config {
  bool disable = false;
  bool strict = false;
  bool levels_auto = true;
  std::vector<Level> levels;  // empty when levels_auto
  std::array<Algo, static_cast<size_t>(Coll::Count)> algo{};    // all Auto
  std::array<Quant, static_cast<size_t>(Coll::Count)> quant{};  // all Off
  LogLevel debug = LogLevel::Warn;
  std::string debug_file;   // template, %h %p %r
  std::string report;       // template, %h %p %r; empty = no report
  std::string trace;        // HIER_TRACE: template, %h %p %r; empty = no trace (diag/trace.hpp)
  double watchdog_s = 0.0;  // 0 = off
  std::string watchdog_if;  // HIER_WATCHDOG_IF: the side channel's interface; empty = the one reaching the other nodes
  int flight = 64;          // HIER_FLIGHT: collective calls kept per thread; 0 = off
  int64_t chunk_bytes = -1; // pipeline chunk size; -1 = auto (the model's candidates, model/plan.hpp), 0 = off
  std::string tune_file;    // measured performance model (JSON); empty = built-in defaults
  int64_t quant_feedback_cap = 0;  // HIER_QUANT_FEEDBACK: bytes of residuals kept per process; 0 = off
  int quant_check_every = 0;       // HIER_QUANT_CHECK: check every Nth quantized call; 0 = off
  int64_t quant_block = 512;       // HIER_QUANT_BLOCK: values per quantization block (quant::kDefaultBlock)
  bool progress_thread = false;  // HIER_PROGRESS=thread: nonblocking collectives advance in a thread
  bool progress_mpi = false;     // HIER_PROGRESS=thread+mpi: the thread advances the MPI's own ones too
  ShmMode shm = ShmMode::Auto;   // HIER_SHM: node-level steps through a shared segment
  ShmCma shm_cma = ShmCma::Auto; // HIER_SHM_CMA: single-copy shm steps
  // HIER_GPU_AWARE: whether the MPI takes device pointers; -1 = auto (asked through
  // MPIX_Query_cuda_support / MPIX_Query_rocm_support, device/gpu_aware.hpp), 0 = no, 1 = yes.
  int gpu_aware = -1;
  // HIER_GPU_MODULE: "auto", "off" or a module's path (device/module.hpp).
  std::string gpu_module = "auto";

  Algo algo_for(Coll c) const { return algo[static_cast<size_t>(c)]; }
  Quant quant_for(Coll c) const { return quant[static_cast<size_t>(c)]; }
};

// Reads one variable; std::nullopt when unset. Tests pass a map, the library passes getenv.
using Getenv = std::function<std::optional<std::string>(const char*)>;

struct ParseResult {
  Config config;
  std::vector<std::string> errors;    // one line each: variable, value, what is allowed
  std::vector<std::string> warnings;  // unknown HIER_* variables (did you mean ...?)
};

// Parses every registered variable. `environ_names` lists the HIER_* names present in the
// environment, for the unknown-variable warnings (pass {} to skip that check).
ParseResult parse(const Getenv& getenv_fn, const std::vector<std::string>& environ_names);

// The process's configuration: parse(getenv, environ) on first use, then cached.
const ParseResult& process_config();
// Turns every collective's algorithm to flat, for good (the ranks' configurations disagree:
// core/agree_config.cpp). Only at init, before libhier becomes active.
void force_flat_collectives();
inline const Config& get() { return process_config().config; }

// Text renderings of parsed values (for hier-info and the report).
std::string to_string(LogLevel);
std::string to_string(Algo);
std::string to_string(Quant);
std::string levels_to_string(const Config&);
std::string chunk_to_string(int64_t chunk_bytes);  // auto, off, or a size (4m, 512k, 1000)

}  // namespace hier::config
