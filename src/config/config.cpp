#include "config/config.hpp"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "config/registry.hpp"

extern char** environ;

namespace hier::config {

ParseResult parse(const Getenv& getenv_fn, const std::vector<std::string>& environ_names) {
  ParseResult r;
  for (const VarSpec& v : registry()) {
    const auto value = getenv_fn(v.name);
    if (!value) continue;
    Config trial = r.config;
    const std::string why = v.apply(*value, trial);
    if (why.empty()) {
      r.config = std::move(trial);
    } else {
      r.errors.push_back(std::string(v.name) + "='" + *value + "' is invalid (" + why + "); allowed: " + v.allowed +
                         "; using the default '" + v.default_value + "'");
    }
  }
  for (const std::string& name : environ_names) {
    if (name.rfind("HIER_", 0) != 0 || find_var(name)) continue;
    std::string w = "unknown variable " + name + " is ignored";
    if (auto c = closest_var(name)) w += "; did you mean " + *c + "?";
    r.warnings.push_back(w);
  }
  return r;
}

namespace {
ParseResult& mutable_config() {
  // A function-local static: parsed on first use (at MPI_Init), never in a constructor.
  static ParseResult result = [] {
    std::vector<std::string> names;
    for (char** e = environ; e && *e; ++e) {
      if (std::strncmp(*e, "HIER_", 5) != 0) continue;
      const char* eq = std::strchr(*e, '=');
      names.emplace_back(*e, eq ? static_cast<size_t>(eq - *e) : std::strlen(*e));
    }
    return parse([](const char* n) -> std::optional<std::string> {
      const char* v = std::getenv(n);
      if (!v) return std::nullopt;
      return std::string(v);
    }, names);
  }();
  return result;
}
}  // namespace

const ParseResult& process_config() { return mutable_config(); }

void force_flat_collectives() { mutable_config().config.algo.fill(Algo::Flat); }

std::string to_string(LogLevel l) {
  switch (l) {
    case LogLevel::None: return "NONE";
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    case LogLevel::Trace: return "TRACE";
  }
  return "?";
}
std::string to_string(Algo a) {
  switch (a) {
    case Algo::Auto: return "auto";
    case Algo::Flat: return "flat";
    case Algo::Hier: return "hier";
  }
  return "?";
}
std::string to_string(Quant q) {
  switch (q) {
    case Quant::Off: return "off";
    case Quant::Int8: return "int8";
    case Quant::Int4: return "int4";
  }
  return "?";
}
std::string chunk_to_string(int64_t b) {
  if (b < 0) return "auto";
  if (b == 0) return "off";
  for (const SizeUnit& u : kSizeUnits)
    if (b % u.bytes == 0) return std::to_string(b / u.bytes) + u.suffix;
  return std::to_string(b);
}

std::string levels_to_string(const Config& c) {
  if (c.levels_auto) return "auto";
  std::ostringstream o;
  for (size_t i = 0; i < c.levels.size(); ++i) {
    if (i) o << ',';
    o << c.levels[i].name;
    if (c.levels[i].size) o << ':' << c.levels[i].size;
  }
  return o.str();
}

}  // namespace hier::config
