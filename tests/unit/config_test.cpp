// Configuration parsing: every HIER_* variable, good and bad values, without MPI.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "config/config.hpp"
#include "config/registry.hpp"
#include "util/strings.hpp"

using namespace hier::config;

namespace {
ParseResult parse_env(const std::map<std::string, std::string>& env) {
  std::vector<std::string> names;
  for (auto& [k, v] : env) names.push_back(k);
  return parse([&](const char* n) -> std::optional<std::string> {
    auto it = env.find(n);
    if (it == env.end()) return std::nullopt;
    return it->second;
  }, names);
}
Config ok(const std::map<std::string, std::string>& env) {
  ParseResult r = parse_env(env);
  EXPECT_TRUE(r.errors.empty()) << (r.errors.empty() ? "" : r.errors[0]);
  return r.config;
}
std::string bad(const std::string& var, const std::string& value) {
  ParseResult r = parse_env({{var, value}});
  EXPECT_EQ(r.errors.size(), 1u) << var << "=" << value;
  return r.errors.empty() ? "" : r.errors[0];
}
}  // namespace

TEST(Config, DefaultsWhenNothingIsSet) {
  Config c = ok({});
  EXPECT_FALSE(c.disable);
  EXPECT_FALSE(c.strict);
  EXPECT_TRUE(c.levels_auto);
  for (size_t i = 0; i < c.algo.size(); ++i) EXPECT_EQ(c.algo[i], Algo::Auto);
  for (size_t i = 0; i < c.quant.size(); ++i) EXPECT_EQ(c.quant[i], Quant::Off);
  EXPECT_EQ(c.debug, LogLevel::Warn);
  EXPECT_TRUE(c.report.empty());
  EXPECT_EQ(c.watchdog_s, 0.0);
}

TEST(Config, Booleans) {
  for (const char* t : {"1", "true", "YES", "on"}) EXPECT_TRUE(ok({{"HIER_DISABLE", t}}).disable) << t;
  for (const char* f : {"0", "false", "No", "off", ""}) EXPECT_FALSE(ok({{"HIER_DISABLE", f}}).disable) << f;
  EXPECT_TRUE(ok({{"HIER_STRICT", "1"}}).strict);
  const std::string e = bad("HIER_DISABLE", "maybe");
  EXPECT_NE(e.find("HIER_DISABLE"), std::string::npos);
  EXPECT_NE(e.find("maybe"), std::string::npos);
  EXPECT_NE(e.find("0 or 1"), std::string::npos);
}

TEST(Config, Levels) {
  Config c = ok({{"HIER_LEVELS", "gpu:2,node:4"}});
  ASSERT_FALSE(c.levels_auto);
  ASSERT_EQ(c.levels.size(), 2u);
  EXPECT_EQ(c.levels[0], (Level{"gpu", 2}));
  EXPECT_EQ(c.levels[1], (Level{"node", 4}));
  c = ok({{"HIER_LEVELS", " GPU:2 , node "}});
  ASSERT_EQ(c.levels.size(), 2u);
  EXPECT_EQ(c.levels[0], (Level{"gpu", 2}));
  EXPECT_EQ(c.levels[1], (Level{"node", 0}));
  EXPECT_TRUE(ok({{"HIER_LEVELS", "auto"}}).levels_auto);
  EXPECT_EQ(levels_to_string(ok({{"HIER_LEVELS", "gcd:2,gpu:8,node:16"}})), "gcd:2,gpu:8,node:16");
  for (const char* v : {"node:0", "node:-1", "node:x", "gpu:2,node:3", "gpu:4,node:2", "node,node", "2gpu", ":3",
                        "world", "node:2,,", "gpu:2;node"}) {
    const std::string e = bad("HIER_LEVELS", v);
    EXPECT_NE(e.find("HIER_LEVELS"), std::string::npos) << v;
    EXPECT_NE(e.find("allowed"), std::string::npos) << v;
  }
  // An invalid value keeps the default.
  EXPECT_TRUE(parse_env({{"HIER_LEVELS", "node:0"}}).config.levels_auto);
}

TEST(Config, AlgoGlobalAndPerCollective) {
  Config c = ok({{"HIER_ALGO", "flat"}});
  for (auto a : c.algo) EXPECT_EQ(a, Algo::Flat);
  c = ok({{"HIER_ALGO", "allreduce=hier,bcast=flat"}});
  EXPECT_EQ(c.algo_for(Coll::Allreduce), Algo::Hier);
  EXPECT_EQ(c.algo_for(Coll::Bcast), Algo::Flat);
  EXPECT_EQ(c.algo_for(Coll::Allgather), Algo::Auto);
  for (size_t i = 0; i < kCollKeys.size(); ++i)
    EXPECT_EQ(ok({{"HIER_ALGO", std::string(kCollKeys[i]) + "=hier"}}).algo[i], Algo::Hier) << kCollKeys[i];
  for (const char* v : {"fast", "allreduce=fast", "allreduc=hier", "allreduce", "allreduce=hier,oops"})
    EXPECT_NE(bad("HIER_ALGO", v).find(v), std::string::npos) << v;
  // All or nothing: a bad item leaves every collective at the default.
  Config d = parse_env({{"HIER_ALGO", "allreduce=hier,bcast=nope"}}).config;
  EXPECT_EQ(d.algo_for(Coll::Allreduce), Algo::Auto);
}

TEST(Config, Quant) {
  EXPECT_EQ(ok({{"HIER_QUANT", "int8"}}).quant_for(Coll::Allreduce), Quant::Int8);
  EXPECT_EQ(ok({{"HIER_QUANT", "int4"}}).quant_for(Coll::ReduceScatterBlock), Quant::Int4);
  // A plain value leaves the allgather exact (its types need only equal signatures).
  EXPECT_EQ(ok({{"HIER_QUANT", "int8"}}).quant_for(Coll::Allgather), Quant::Off);
  Config c = ok({{"HIER_QUANT", "allgather=int8,reduce_scatter=int4"}});
  EXPECT_EQ(c.quant_for(Coll::Allgather), Quant::Int8);
  EXPECT_EQ(c.quant_for(Coll::ReduceScatter), Quant::Int4);
  EXPECT_EQ(c.quant_for(Coll::Allreduce), Quant::Off);
  EXPECT_EQ(ok({{"HIER_QUANT", "off"}}).quant_for(Coll::Allreduce), Quant::Off);
  for (const char* v : {"int2", "fp8", "allgather=int3", "nothing=int8"}) bad("HIER_QUANT", v);
}

TEST(Config, DebugLevels) {
  EXPECT_EQ(ok({{"HIER_DEBUG", "info"}}).debug, LogLevel::Info);
  EXPECT_EQ(ok({{"HIER_DEBUG", "TRACE"}}).debug, LogLevel::Trace);
  EXPECT_EQ(ok({{"HIER_DEBUG", "none"}}).debug, LogLevel::None);
  EXPECT_EQ(ok({{"HIER_DEBUG", "WARN"}}).debug, LogLevel::Warn);
  EXPECT_NE(bad("HIER_DEBUG", "LOUD").find("TRACE"), std::string::npos);
}

TEST(Config, PathTemplates) {
  EXPECT_EQ(ok({{"HIER_REPORT", "/tmp/r.%r.%h.%p.json"}}).report, "/tmp/r.%r.%h.%p.json");
  EXPECT_EQ(ok({{"HIER_DEBUG_FILE", "log.%r"}}).debug_file, "log.%r");
  EXPECT_NE(bad("HIER_REPORT", "/tmp/r.%x").find("%x"), std::string::npos);
  bad("HIER_REPORT", "trailing%");
  EXPECT_EQ(ok({{"HIER_TRACE", "t.%r.json"}}).trace, "t.%r.json");
  EXPECT_NE(bad("HIER_TRACE", "t.%q").find("%q"), std::string::npos);
  bad("HIER_DEBUG_FILE", "  ");
  EXPECT_EQ(hier::util::expand_path_template("a.%r.%%", 3), "a.3.%");
  EXPECT_EQ(hier::util::expand_path_template("a.%r", -1), "a.na");
  EXPECT_NE(hier::util::expand_path_template("%p", 0), "%p");
  EXPECT_NE(hier::util::expand_path_template("%h", 0), "%h");
}

TEST(Config, Watchdog) {
  EXPECT_EQ(ok({{"HIER_WATCHDOG", "30"}}).watchdog_s, 30.0);
  EXPECT_EQ(ok({{"HIER_WATCHDOG", "0.5"}}).watchdog_s, 0.5);
  EXPECT_EQ(ok({{"HIER_WATCHDOG", "0.1"}}).watchdog_s, 0.1);
  EXPECT_EQ(ok({{"HIER_WATCHDOG", "0"}}).watchdog_s, 0.0);
  // Below the floor (0.1 s): 1e-300 would be a limit of 0 ns.
  for (const char* v : {"-1", "soon", "", "1e9", "nan", "1e-300", "0.09"}) bad("HIER_WATCHDOG", v);
  EXPECT_NE(bad("HIER_WATCHDOG", "1e-300").find("HIER_WATCHDOG='1e-300' is invalid (below the floor of 0.1 s)"),
            std::string::npos);
}

TEST(Config, Flight) {
  EXPECT_EQ(ok({}).flight, 64);
  EXPECT_EQ(ok({{"HIER_FLIGHT", "0"}}).flight, 0);
  EXPECT_EQ(ok({{"HIER_FLIGHT", "4096"}}).flight, 4096);
  for (const char* v : {"-1", "many", "", "4097", "1e3", "64k"}) bad("HIER_FLIGHT", v);
  EXPECT_NE(bad("HIER_FLIGHT", "4097").find("HIER_FLIGHT='4097' is invalid (not a number of calls from 0 to 4096)"),
            std::string::npos);
}

TEST(Config, Chunk) {
  EXPECT_EQ(ok({}).chunk_bytes, -1);
  EXPECT_EQ(ok({{"HIER_CHUNK", "auto"}}).chunk_bytes, -1);
  EXPECT_EQ(ok({{"HIER_CHUNK", "off"}}).chunk_bytes, 0);
  EXPECT_EQ(ok({{"HIER_CHUNK", "0"}}).chunk_bytes, 0);
  EXPECT_EQ(ok({{"HIER_CHUNK", "4096"}}).chunk_bytes, 4096);
  EXPECT_EQ(ok({{"HIER_CHUNK", "64k"}}).chunk_bytes, 64 << 10);
  EXPECT_EQ(ok({{"HIER_CHUNK", " 4M "}}).chunk_bytes, 4 << 20);
  EXPECT_EQ(ok({{"HIER_CHUNK", "2MiB"}}).chunk_bytes, 2 << 20);
  EXPECT_EQ(ok({{"HIER_CHUNK", "1g"}}).chunk_bytes, int64_t{1} << 30);
  EXPECT_EQ(chunk_to_string(-1), "auto");
  EXPECT_EQ(chunk_to_string(0), "off");
  EXPECT_EQ(chunk_to_string(4 << 20), "4m");
  EXPECT_EQ(chunk_to_string(3072), "3k");
  EXPECT_EQ(chunk_to_string(1536), "1536");
  EXPECT_EQ(chunk_to_string(1000), "1000");
  for (const char* v : {"-1", "big", "4x", "4 mm", "1e6", "99999999999g"}) {
    const std::string e = bad("HIER_CHUNK", v);
    EXPECT_NE(e.find("HIER_CHUNK"), std::string::npos) << e;
    EXPECT_NE(e.find(v), std::string::npos) << e;
  }
}

TEST(Config, TuneFile) {
  EXPECT_EQ(ok({{"HIER_TUNE_FILE", "/tmp/t.json"}}).tune_file, "/tmp/t.json");
  bad("HIER_TUNE_FILE", "");
}

TEST(Config, SeveralErrorsAreReportedIndependently) {
  ParseResult r = parse_env({{"HIER_ALGO", "x"}, {"HIER_DEBUG", "y"}, {"HIER_DISABLE", "1"}});
  EXPECT_EQ(r.errors.size(), 2u);
  EXPECT_TRUE(r.config.disable);
}

TEST(Config, UnknownVariablesGetDidYouMean) {
  ParseResult r = parse_env({{"HIER_LEVLES", "node:2"}, {"HIER_ALOG", "flat"}, {"HIER_COMPLETELY_OTHER", "1"}});
  ASSERT_EQ(r.warnings.size(), 3u);
  std::string all;
  for (auto& w : r.warnings) all += w + "\n";
  EXPECT_NE(all.find("HIER_LEVLES is ignored; did you mean HIER_LEVELS?"), std::string::npos) << all;
  EXPECT_NE(all.find("HIER_ALOG is ignored; did you mean HIER_ALGO?"), std::string::npos) << all;
  EXPECT_NE(all.find("unknown variable HIER_COMPLETELY_OTHER is ignored\n"), std::string::npos) << all;
}

TEST(Registry, EveryVariableIsDocumentedAndHasAValidDefault) {
  for (const VarSpec& v : registry()) {
    EXPECT_EQ(std::string(v.name).rfind("HIER_", 0), 0u);
    EXPECT_GT(std::string(v.doc).size(), 10u) << v.name;
    EXPECT_GT(std::string(v.allowed).size(), 2u) << v.name;
    if (*v.default_value) {
      Config c;
      EXPECT_EQ(v.apply(v.default_value, c), "") << v.name << " default '" << v.default_value << "' does not parse";
    }
    EXPECT_NE(markdown_table().find(std::string("`") + v.name + "`"), std::string::npos);
  }
}
