// hier_measured (hier-tune --hier): libhier's own schedules measured on the tune file's shape.
// On that shape the planner's hierarchical prediction is the measurement (log-log between the
// points, the IR's cost scaled to the nearest point outside them); on any other shape, or with a
// forced chunk size, the IR's cost alone; the loader reads and checks the points like flat_measured's.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "model/cost.hpp"
#include "model/load.hpp"
#include "model/plan.hpp"
#include "model/shapes.hpp"
#include "model_testing.hpp"

namespace {

using namespace hier;
using config::Coll;
using sched::Algorithm;

// model_testing's round numbers, with the planner's default margin, on the 2 x 2 shape of the
// points below.
model::Model simple() {
  model::Model m = model_testing::simple();
  m.margin = 0.05;
  m.nodes = 2;
  m.ranks_per_node = 2;
  return m;
}

// The IR's cheapest hierarchical allreduce (every candidate, unchunked) at `bytes`.
double ir_best(const model::Model& m, const topo::Shape& s, int64_t bytes) {
  const model::Call call{Coll::Allreduce, bytes, 4};
  return std::min(model::hier_cost(call, s, m, Algorithm::RsArAg, 1), model::hier_cost(call, s, m, Algorithm::TreeAllreduce, 1));
}

TEST(ModelHierMeasured, PredictionIsTheMeasurementOnItsShape) {
  model::Model m = simple();
  const topo::Shape s = model::two_level(2, 2);
  config::Config cfg = model_testing::messages();
  const model::Plan before = model::plan({Coll::Allreduce, 8192, 4}, s, m, cfg);
  ASSERT_GT(before.hier_ns, 0);
  EXPECT_NEAR(before.hier_ns, ir_best(m, s, 8192), 1e-6);  // no points: the IR
  m.hier_measured[static_cast<size_t>(Coll::Allreduce)] = {{4096, 50000}, {16384, 200000}};
  // At a point: its time; between two: log-log (halfway in log bytes: the geometric mean).
  EXPECT_DOUBLE_EQ(model::plan({Coll::Allreduce, 4096, 4}, s, m, cfg).hier_ns, 50000.0);
  EXPECT_NEAR(model::plan({Coll::Allreduce, 8192, 4}, s, m, cfg).hier_ns, 100000.0, 1e-6);
  // Outside: the IR's cost scaled by the nearest point's measured / IR ratio.
  const double above = ir_best(m, s, 65536) * 200000.0 / ir_best(m, s, 16384);
  EXPECT_NEAR(model::plan({Coll::Allreduce, 65536, 4}, s, m, cfg).hier_ns, above, 1e-6 * above);
  const double below = ir_best(m, s, 1024) * 50000.0 / ir_best(m, s, 4096);
  EXPECT_NEAR(model::plan({Coll::Allreduce, 1024, 4}, s, m, cfg).hier_ns, below, 1e-6 * below);
  // Another shape, or another collective: the IR alone.
  const topo::Shape other = model::two_level(4, 2);
  const model::Call call{Coll::Allreduce, 8192, 4};
  EXPECT_NEAR(model::plan(call, other, m, cfg).hier_ns,
              std::min(model::hier_cost(call, other, m, Algorithm::RsArAg, 1),
                       model::hier_cost(call, other, m, Algorithm::TreeAllreduce, 1)),
              1e-6);
  // A forced chunk size (HIER_CHUNK) runs other schedules than hier-tune measured: the IR.
  config::Config chunked = model_testing::messages();
  chunked.chunk_bytes = 2048;
  const model::Plan pc = model::plan({Coll::Allreduce, 8192, 4}, s, m, chunked);
  EXPECT_NEAR(pc.hier_ns, std::min(model::hier_cost(call, s, m, Algorithm::RsArAg, pc.chunks),
                                   model::hier_cost(call, s, m, Algorithm::TreeAllreduce, pc.chunks)),
              1e-6);
  EXPECT_GT(pc.chunks, 1);
  const model::Plan bc = model::plan({Coll::Bcast, 8192, 1}, s, m, cfg);
  EXPECT_NEAR(bc.hier_ns, std::min(model::hier_cost({Coll::Bcast, 8192, 1}, s, m, Algorithm::ScatterAllgather, 1),
                                   model::hier_cost({Coll::Bcast, 8192, 1}, s, m, Algorithm::TwoStep, 1)),
              1e-6);
}

// The decision follows the measurement: a schedule the IR finds cheaper but that measured
// slower than the MPI goes flat, and the reverse.
TEST(ModelHierMeasured, DecisionFollowsTheMeasurement) {
  model::Model m = simple();
  const topo::Shape s = model::two_level(2, 2);
  config::Config cfg = model_testing::messages();
  const int64_t b = 1 << 20;
  const model::Plan ir = model::plan({Coll::Allreduce, b, 4}, s, m, cfg);
  ASSERT_NE(ir.algo, Algorithm::Flat) << model::describe(ir);  // the IR prefers the hierarchy here
  m.flat_measured[static_cast<size_t>(Coll::Allreduce)] = {{double(b), 1e6}};
  m.hier_measured[static_cast<size_t>(Coll::Allreduce)] = {{double(b), 0.97e6}};  // within the 5% margin
  const model::Plan close = model::plan({Coll::Allreduce, b, 4}, s, m, cfg);
  EXPECT_EQ(close.algo, Algorithm::Flat) << model::describe(close);
  EXPECT_DOUBLE_EQ(close.hier_ns, 0.97e6);
  m.hier_measured[static_cast<size_t>(Coll::Allreduce)] = {{double(b), 0.5e6}};
  const model::Plan win = model::plan({Coll::Allreduce, b, 4}, s, m, cfg);
  EXPECT_EQ(win.algo, ir.algo) << model::describe(win);  // the candidate is still the IR's choice
  EXPECT_EQ(win.chunks, ir.chunks);
  // Forced hierarchical: the measured prediction is shown, the schedule runs whatever it costs.
  m.hier_measured[static_cast<size_t>(Coll::Allreduce)] = {{double(b), 5e6}};
  cfg.algo.fill(config::Algo::Hier);
  const model::Plan forced = model::plan({Coll::Allreduce, b, 4}, s, m, cfg);
  EXPECT_NE(forced.algo, Algorithm::Flat);
  EXPECT_DOUBLE_EQ(forced.hier_ns, 5e6);
}

std::string file(const std::string& hier_measured) {
  return R"({"format":"libhier-tune/2","machine":{"host":"h","mpi_family":"openmpi","nodes":2,"ranks_per_node":4},
            "levels":{"intra":{"latency_ns":100,"ns_per_byte":0.1},"inter":{"latency_ns":2000,"ns_per_byte":1.0}},
            "compute":{"reduce_ns_per_byte":0.2,"copy_ns_per_byte":0.1},)" +
         hier_measured + R"("dtype":{"policy":"never"}})";
}

TEST(ModelHierMeasured, LoaderReadsAndChecksThePoints) {
  const model::Model& base = model::builtin(model::Family::OpenMPI);
  model::TuneFile t;
  std::string err;
  ASSERT_TRUE(model::parse(file(R"("hier_measured":{"bcast":[{"bytes":65536,"ns":1e6},{"bytes":1048576,"ns":3e6}],"nosuch":[]},)"),
                           model::Family::OpenMPI, {2, 4}, base, t, err))
      << err;
  const auto& pts = t.model.hier_measured[static_cast<size_t>(Coll::Bcast)];
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_DOUBLE_EQ(pts[1].bytes, 1048576);
  EXPECT_DOUBLE_EQ(pts[1].ns, 3e6);
  EXPECT_TRUE(t.model.hier_measured[static_cast<size_t>(Coll::Allreduce)].empty());
  // Optional: a file without them has none (never the base's).
  ASSERT_TRUE(model::parse(file(""), model::Family::OpenMPI, {2, 4}, t.model, t, err)) << err;
  for (const auto& v : t.model.hier_measured) EXPECT_TRUE(v.empty());
  // Broken: one line naming the place.
  const std::pair<const char*, const char*> bad[] = {
      {R"("hier_measured":[],)", "hier_measured is not an object"},
      {R"("hier_measured":{"allreduce":{}},)", "hier_measured.allreduce is not a list"},
      {R"("hier_measured":{"allreduce":[{"bytes":4096,"ns":1},{"bytes":1024,"ns":2}]},)", "bytes not ascending"},
      {R"("hier_measured":{"allreduce":[{"bytes":4096,"ns":-1}]},)", "hier_measured.allreduce[0].ns"},
  };
  for (const auto& [text, want] : bad) {
    model::TuneFile u;
    EXPECT_FALSE(model::parse(file(text), model::Family::OpenMPI, {2, 4}, base, u, err)) << text;
    EXPECT_NE(err.find(want), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
}

}  // namespace
