// The one table of HIER_* variables. The parser, hier-info, the README table and the
// "unknown variable, did you mean" warning all come from it; add a knob here and nowhere else.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "config/config.hpp"

namespace hier::config {

struct VarSpec {
  const char* name;
  const char* default_value;  // as the user would write it
  const char* allowed;        // what an error message says is allowed
  const char* doc;            // one sentence for hier-info and the README
  // Parses `value` into `cfg`; returns an empty string on success, else why it is invalid.
  std::string (*apply)(const std::string& value, Config& cfg);
  // Ranks that differ here would run different schedules and deadlock: compared at MPI_Init
  // (core/agree_config.cpp), and on a mismatch collectives run flat on every rank.
  bool same_on_every_rank = false;
};

// Byte-size suffixes (powers of 1024), largest first: HIER_CHUNK is parsed and printed with them.
struct SizeUnit {
  const char* suffix;
  int64_t bytes;
};
inline constexpr SizeUnit kSizeUnits[] = {{"g", int64_t{1} << 30}, {"m", int64_t{1} << 20}, {"k", int64_t{1} << 10}};

std::span<const VarSpec> registry();
const VarSpec* find_var(const std::string& name);

// The closest registered name within a small edit distance, for the did-you-mean warning.
std::optional<std::string> closest_var(const std::string& name);

// Markdown table of every variable (README section is generated from this).
std::string markdown_table();

}  // namespace hier::config
