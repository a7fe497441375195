// The tune file's one schema (model/tune_schema.hpp): what write() gives, parse() reads back
// unchanged: the built-in files of both families (every section), and a document with every
// optional figure hier-tune measures (ladder, level steps, hier_measured, the nonblocking
// calls, the segment, the GPU module's device rates); a bad value of a new section is one line
// naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "model/load.hpp"
#include "model/tune_schema.hpp"

namespace {

using namespace hier::model;

void expect_level_eq(const LevelParams& a, const LevelParams& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.latency_ns, b.latency_ns);
  EXPECT_EQ(a.ns_per_byte, b.ns_per_byte);
  ASSERT_EQ(a.concurrent.size(), b.concurrent.size());
  for (size_t i = 0; i < a.concurrent.size(); ++i) {
    EXPECT_EQ(a.concurrent[i].flows, b.concurrent[i].flows);
    EXPECT_EQ(a.concurrent[i].ns_per_byte, b.concurrent[i].ns_per_byte);
  }
  ASSERT_EQ(a.ladder.size(), b.ladder.size());
  for (size_t i = 0; i < a.ladder.size(); ++i) {
    EXPECT_EQ(a.ladder[i].bytes, b.ladder[i].bytes);
    EXPECT_EQ(a.ladder[i].ns, b.ladder[i].ns);
    EXPECT_EQ(a.ladder[i].ns_all, b.ladder[i].ns_all);
  }
  EXPECT_EQ(a.ladder_flows, b.ladder_flows);
  EXPECT_EQ(a.step_members, b.step_members);
  for (size_t c = 0; c < kColls; ++c) {
    ASSERT_EQ(a.steps[c].size(), b.steps[c].size());
    for (size_t i = 0; i < a.steps[c].size(); ++i) {
      EXPECT_EQ(a.steps[c][i].bytes, b.steps[c][i].bytes);
      EXPECT_EQ(a.steps[c][i].ns, b.steps[c][i].ns);
      EXPECT_EQ(a.steps[c][i].measured_ns, b.steps[c][i].measured_ns);
    }
  }
}

void expect_points_eq(const std::array<std::vector<Point>, kColls>& a, const std::array<std::vector<Point>, kColls>& b,
                      const std::string& what) {
  SCOPED_TRACE(what);
  for (size_t c = 0; c < kColls; ++c) {
    ASSERT_EQ(a[c].size(), b[c].size()) << c;
    for (size_t i = 0; i < a[c].size(); ++i) {
      EXPECT_EQ(a[c][i].bytes, b[c][i].bytes);
      EXPECT_EQ(a[c][i].ns, b[c][i].ns);
    }
  }
}

void expect_model_eq(const Model& a, const Model& b) {
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.ranks_per_node, b.ranks_per_node);
  expect_level_eq(a.intra, b.intra, "intra");
  expect_level_eq(a.inter, b.inter, "inter");
  EXPECT_EQ(a.reduce_ns_per_byte, b.reduce_ns_per_byte);
  EXPECT_EQ(a.copy_ns_per_byte, b.copy_ns_per_byte);
  for (int bits : {8, 4}) {
    EXPECT_EQ(a.quant(bits).quantize_ns_per_byte, b.quant(bits).quantize_ns_per_byte);
    EXPECT_EQ(a.quant(bits).dequantize_ns_per_byte, b.quant(bits).dequantize_ns_per_byte);
    EXPECT_EQ(a.quant(bits).dequantize_add_ns_per_byte, b.quant(bits).dequantize_add_ns_per_byte);
  }
  for (size_t c = 0; c < kColls; ++c) {
    ASSERT_EQ(a.flat_algorithms[c].size(), b.flat_algorithms[c].size());
    for (size_t i = 0; i < a.flat_algorithms[c].size(); ++i) {
      EXPECT_EQ(a.flat_algorithms[c][i].algo, b.flat_algorithms[c][i].algo);
      EXPECT_EQ(a.flat_algorithms[c][i].below_bytes, b.flat_algorithms[c][i].below_bytes);
    }
    if (hier::config::pipelined(static_cast<hier::config::Coll>(c))) {
      EXPECT_EQ(a.chunk_bytes[c], b.chunk_bytes[c]);
    }
  }
  expect_points_eq(a.flat_measured, b.flat_measured, "flat_measured");
  expect_points_eq(a.hier_measured, b.hier_measured, "hier_measured");
  expect_points_eq(a.flat_measured_nb, b.flat_measured_nb, "flat_measured_nonblocking");
  expect_points_eq(a.hier_measured_nb, b.hier_measured_nb, "hier_measured_nonblocking");
  EXPECT_EQ(a.margin, b.margin);
  EXPECT_EQ(a.step_overhead_ns, b.step_overhead_ns);
  EXPECT_EQ(a.overlap, b.overlap);
  EXPECT_EQ(a.direct_rs_from, b.direct_rs_from);
  EXPECT_EQ(a.padded_agv_from, b.padded_agv_from);
  EXPECT_EQ(a.scatterv_sequential, b.scatterv_sequential);
  EXPECT_EQ(a.shm.copy_ns_per_byte, b.shm.copy_ns_per_byte);
  EXPECT_EQ(a.shm.reduce_ns_per_byte, b.shm.reduce_ns_per_byte);
  EXPECT_EQ(a.shm.round_ns, b.shm.round_ns);
  EXPECT_EQ(a.shm.members, b.shm.members);
  EXPECT_EQ(a.shm.single_ns_per_byte, b.shm.single_ns_per_byte);
  EXPECT_EQ(a.device.step_ns, b.device.step_ns);
  EXPECT_EQ(a.device.copy_ns_per_byte, b.device.copy_ns_per_byte);
  EXPECT_EQ(a.device.h2d_ns_per_byte, b.device.h2d_ns_per_byte);
  EXPECT_EQ(a.device.d2h_ns_per_byte, b.device.d2h_ns_per_byte);
  EXPECT_EQ(a.device.reduce_ns_per_byte, b.device.reduce_ns_per_byte);
  for (int bits : {8, 4}) {
    EXPECT_EQ(a.device.q(bits).quantize_ns_per_byte, b.device.q(bits).quantize_ns_per_byte);
    EXPECT_EQ(a.device.q(bits).dequantize_ns_per_byte, b.device.q(bits).dequantize_ns_per_byte);
    EXPECT_EQ(a.device.q(bits).dequantize_add_ns_per_byte, b.device.q(bits).dequantize_add_ns_per_byte);
  }
  EXPECT_EQ(a.device.measured, b.device.measured);
  EXPECT_EQ(a.device.module, b.device.module);
  EXPECT_EQ(a.device.device, b.device.device);
}

TuneDoc all_sections(const Model& m) {
  TuneDoc d;
  d.model = m;
  d.machine = {"host", "an MPI", "2026-11-27", "test"};
  d.has.flat_algorithms = d.has.margin = d.has.step_overhead = d.has.pipeline = d.has.steps = true;
  d.has.hier_measured = true;
  d.has.shm = m.shm.members > 0;
  d.has.device = true;
  return d;
}

TEST(TuneSchema, BuiltinFilesRoundTrip) {
  for (Family f : {Family::OpenMPI, Family::Mpich}) {
    SCOPED_TRACE(to_string(f));
    TuneFile first;
    std::string err;
    ASSERT_TRUE(parse(builtin_text(f), f, JobShape{}, Model{}, first, err)) << err;
    TuneDoc d = all_sections(first.model);
    d.dtype_json = first.dtype_json;
    TuneFile again;
    ASSERT_TRUE(parse(write(d), f, JobShape{}, Model{}, again, err)) << err;
    expect_model_eq(first.model, again.model);
    EXPECT_EQ(first.dtype_json, again.dtype_json);
  }
}

TEST(TuneSchema, EveryMeasuredFigureRoundTrips) {
  Model m = builtin(Family::OpenMPI);
  m.nodes = 2, m.ranks_per_node = 4;
  m.intra.ladder = {{4096, 1000.5, 2000.25}, {65536, 9000, 30000}};
  m.intra.ladder_flows = 4;
  m.inter.step_members = 2;
  m.inter.steps[0] = {{16384, 5e4, 7e4}, {262144, 4e5, 5e5}};
  m.flat_measured[0] = {{65536, 1e6}, {1048576, 8e6}};
  m.flat_measured_nb[0] = {{65536, 1.5e6}, {1048576, 9.5e6}};
  m.hier_measured[0] = {{65536, 0.9e6}, {1048576, 5e6}};
  m.hier_measured_nb[0] = {{65536, 1.1e6}, {1048576, 6e6}};
  m.shm = {0.125, 0.0625, 15000.5, 4, 0.03125};
  m.quant(4).quantize_ns_per_byte = 0.33;
  m.device.step_ns = 7500.5;
  m.device.copy_ns_per_byte = 0.000625;
  m.device.h2d_ns_per_byte = 0.0195;
  m.device.d2h_ns_per_byte = 0.021;
  m.device.reduce_ns_per_byte = 0.00125;
  m.device.q(8) = {0.0011, 0.0009, 0.0013};
  m.device.q(4) = {0.0012, 0.001, 0.0014};
  m.device.measured = true, m.device.module = "cuda", m.device.device = "a GPU";
  TuneDoc d = all_sections(m);
  d.intra_notes = {1234.5, 2345.5};
  d.quant_block = 256;
  d.quant_bytes = 1 << 20;
  TuneFile back;
  std::string err;
  const std::string text = write(d);
  ASSERT_TRUE(parse(text, Family::OpenMPI, JobShape{2, 4}, Model{}, back, err)) << err;
  expect_model_eq(m, back.model);
  // The notes are written for the reader (not read into the model).
  EXPECT_NE(text.find("\"busy_latency_ns\": 2345.5"), std::string::npos) << text;
  EXPECT_NE(text.find("\"block\": 256"), std::string::npos);
  // A section left out keeps the base model's figures.
  d.has.shm = false;
  Model base = m;
  base.shm = {0.5, 0.5, 99, 8};
  ASSERT_TRUE(parse(write(d), Family::OpenMPI, JobShape{2, 4}, base, back, err)) << err;
  EXPECT_EQ(back.model.shm.round_ns, 99);
  EXPECT_EQ(back.model.shm.members, 8);
  // Without a device section: the built-in (assumed) device rates.
  d.has.device = false;
  ASSERT_TRUE(parse(write(d), Family::OpenMPI, JobShape{2, 4}, Model{}, back, err)) << err;
  EXPECT_EQ(back.model.device.step_ns, builtin_device_rates().step_ns);
  EXPECT_EQ(back.model.device.h2d_ns_per_byte, builtin_device_rates().h2d_ns_per_byte);
  EXPECT_FALSE(back.model.device.measured);
}

TEST(TuneSchema, BadDeviceValueIsOneLine) {
  Model m = builtin(Family::OpenMPI);
  m.nodes = 1, m.ranks_per_node = 4;
  m.device.h2d_ns_per_byte = 0.5;
  TuneDoc d = all_sections(m);
  d.has.inter = false;
  std::string text = write(d);
  const std::string key = "\"h2d_ns_per_byte\": 0.5";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  TuneFile out;
  std::string err;
  text.replace(at, key.size(), "\"h2d_ns_per_byte\": -1");
  EXPECT_FALSE(parse(text, Family::OpenMPI, JobShape{}, Model{}, out, err));
  EXPECT_EQ(err, "device.h2d_ns_per_byte = -1 (must be >= 0.0)");
  text.replace(text.find("\"h2d_ns_per_byte\": -1"), std::strlen("\"h2d_ns_per_byte\": -1"), "\"h2d\": 1");
  EXPECT_FALSE(parse(text, Family::OpenMPI, JobShape{}, Model{}, out, err));
  EXPECT_EQ(err, "missing device.h2d_ns_per_byte");
}

TEST(TuneSchema, BadShmValueIsOneLine) {
  Model m = builtin(Family::Mpich);
  m.nodes = 1, m.ranks_per_node = 4;
  m.shm = {0.1, 0.1, 100, 4};
  TuneDoc d = all_sections(m);
  d.has.inter = false;
  std::string text = write(d);
  const std::string key = "\"round_ns\": 100.0";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, key.size(), "\"round_ns\": -3");
  TuneFile out;
  std::string err;
  EXPECT_FALSE(parse(text, Family::Mpich, JobShape{}, Model{}, out, err));
  EXPECT_EQ(err, "shm.round_ns = -3 (must be >= 0.0)");
}

}  // namespace
