// HIER_SHM in the model (docs/shm.md): a level step marked Via::Shm is costed from the copy and
// reduction rates and the flag rounds (Model::shm, round_ns per slot half), not as the MPI's
// messages; the planner routes the steps inside a node when HIER_SHM is on, and only those; under
// auto it routes them only where the segment's measured figures make them cheaper.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/cost.hpp"
#include "model/cost_quant.hpp"
#include "model/load.hpp"
#include "model/plan.hpp"
#include "model/shapes.hpp"
#include "model_testing.hpp"
#include "sched/build.hpp"
#include "sched/transport.hpp"
#include "shm/segment.hpp"

namespace {

using namespace hier;
using sched::Kind;

model::Model rates() {
  model::Model m = model_testing::simple();
  m.copy_ns_per_byte = 0.25;
  m.reduce_ns_per_byte = 0.5;
  m.shm.round_ns = 7000;
  return m;
}

TEST(ModelShm, StepCostFromRatesAndRounds) {
  const model::Model m = rates();
  const topo::Shape s = model::two_level(2, 4);
  sched::Step st;
  st.kind = Kind::ReduceScatter;
  st.comm = {sched::On::Step, 0};
  const int64_t piece = int64_t{1} << 20;  // floats per member: 4 MiB each, 16 MiB in all
  st.counts.assign(4, piece);
  const double msgs = model::step_cost(st, 0, s, m, 4, 1);
  st.via = sched::Via::Shm;
  const double in = 16.0 * (1 << 20);
  const double rounds = in / static_cast<double>(shm::kHalfBytes);
  EXPECT_DOUBLE_EQ(model::step_cost(st, 0, s, m, 4, 1), in * 0.25 + in * 3 / 4 * 0.5 + rounds * 7000);
  EXPECT_NE(model::step_cost(st, 0, s, m, 4, 1), msgs);
  st.kind = Kind::Barrier;
  st.counts.clear();
  EXPECT_DOUBLE_EQ(model::step_cost(st, 0, s, m, 4, 1), 7000);
}

TEST(ModelShm, PlannerRoutesOnlyInsideNodes) {
  const topo::Shape s = model::two_level(2, 4);
  sched::Schedule x = sched::build_allreduce(s, 0, 1 << 20, false, sched::Algorithm::RsArAg, false);
  model::route_inside_nodes(x, s, 0, rates(), 4);
  int shm = 0;
  for (const sched::Step& st : x.steps) {
    if (st.comm.on == sched::On::Step && st.comm.level == 1) {
      EXPECT_EQ(st.via, sched::Via::Mpi) << sched::to_string(x);
    }
    shm += st.via == sched::Via::Shm;
  }
  EXPECT_GE(shm, 2) << sched::to_string(x);  // the node reduce-scatter and allgather
  // The executor's routing is the same rule: on one machine (HIER_LEVELS fakes) every level
  // communicator could have a segment, yet only those inside a node are routed.
  sched::Schedule y = sched::build_allreduce(s, 0, 1 << 20, false, sched::Algorithm::RsArAg, false);
  sched::route_shm(y, s, [](const sched::CommRef&) { return true; });
  EXPECT_EQ(sched::to_string(y), sched::to_string(x));
  // The planner's prediction changes with HIER_SHM (the node steps are costed from the rates).
  const model::Model m = rates();
  const model::Call call{config::Coll::Allreduce, 64 << 20, 4};
  EXPECT_NE(model::hier_cost(call, s, m, sched::Algorithm::RsArAg, 1, true),
            model::hier_cost(call, s, m, sched::Algorithm::RsArAg, 1, false));
}

// The segment's own measured rates (hier-tune's "shm" section) replace the compute rates.
TEST(ModelShm, MeasuredSegmentRatesUsed) {
  model::Model m = rates();
  const topo::Shape s = model::two_level(2, 4);
  sched::Step st;
  st.kind = Kind::Bcast;
  st.comm = {sched::On::Node, 0};
  st.count = 1 << 18;  // 1 MiB of floats: one round
  st.via = sched::Via::Shm;
  EXPECT_DOUBLE_EQ(model::step_cost(st, 0, s, m, 4, 1), (1 << 20) * 0.25 + 7000);
  m.shm = {2.0, 3.0, 500, 4};
  EXPECT_DOUBLE_EQ(model::step_cost(st, 0, s, m, 4, 1), (1 << 20) * 2.0 + 500);
}

// Single copy (hier-tune's shm.single_ns_per_byte, where the kernel allowed it): a large
// reduce-scatter or allgather step is costed as the executor runs it then (exec/shm_steps.cpp):
// its own piece copied, the peers' read through the kernel (and folded), two rounds, where that
// is cheaper than copy-in; small steps, dearer reads and unmeasured rates stay copy-in.
TEST(ModelShm, SingleCopyCostedWhereMeasured) {
  model::Model m = rates();
  const topo::Shape s = model::two_level(2, 4);
  sched::Step st;
  st.kind = Kind::ReduceScatter;
  st.comm = {sched::On::Node, 0};
  st.counts.assign(4, int64_t{1} << 20);  // 4 MiB of floats per member, 16 MiB in all
  st.via = sched::Via::Shm;
  // The step as the plan routes it (model::shm_single under HIER_SHM_CMA=auto), then costed.
  auto planned_cost = [&](bool with_reduce = true) {
    st.single = model::shm_single(st, 4, 4, m, config::ShmCma::Auto);
    return model::step_cost(st, 0, s, m, 4, 1, with_reduce);
  };
  const double copyin = planned_cost();
  m.shm.single_ns_per_byte = 0.125;
  const double all = 16.0 * (1 << 20), piece = all / 4;
  EXPECT_DOUBLE_EQ(planned_cost(), piece * 0.25 + 3 * piece * (0.125 + 0.5) + 2 * 7000);
  EXPECT_LT(planned_cost(), copyin);
  st.kind = Kind::Allgather;
  st.counts.clear();
  st.count = int64_t{1} << 20;
  EXPECT_DOUBLE_EQ(planned_cost(), piece * 0.25 + 3 * piece * 0.125 + 2 * 7000);
  EXPECT_TRUE(model::shm_single_cheaper(st, 4, 4, m));
  st.count = 1024;  // 16 KiB gathered: below the single-copy threshold, costed copy-in
  EXPECT_DOUBLE_EQ(planned_cost(), 4096.0 * 4 * 0.25 + 7000);
  EXPECT_FALSE(model::shm_single_cheaper(st, 4, 4, m));
  // A kernel read dearer than copying through the slots: copy-in, costed and run (HIER_SHM_CMA=auto).
  st.count = int64_t{1} << 20;
  m.shm.single_ns_per_byte = 10;
  EXPECT_FALSE(model::shm_single_cheaper(st, 4, 4, m));
  EXPECT_DOUBLE_EQ(planned_cost(), all * 0.25 + 4 * 7000);
}

// Bcast and reduce single copy: the root's buffer read (bcast); my piece of every member's
// buffer read and folded, and the sums written to the root's (reduce), two rounds; copy-in
// where cheaper or below the threshold.
TEST(ModelShm, SingleCopyBcastAndReduce) {
  model::Model m = rates();
  const topo::Shape s = model::two_level(2, 4);
  m.shm.single_ns_per_byte = 0.125;
  sched::Step st;
  st.comm = {sched::On::Node, 0};
  st.count = int64_t{1} << 22;  // 16 MiB of floats
  st.via = sched::Via::Shm;
  // The step as the plan routes it (model::shm_single under HIER_SHM_CMA=auto), then costed.
  auto planned_cost = [&](bool with_reduce = true) {
    st.single = model::shm_single(st, 4, 4, m, config::ShmCma::Auto);
    return model::step_cost(st, 0, s, m, 4, 1, with_reduce);
  };
  const double n = 16.0 * (1 << 20);
  st.kind = Kind::Bcast;
  EXPECT_DOUBLE_EQ(planned_cost(), n * 0.125 + 2 * 7000);
  EXPECT_TRUE(model::shm_single_cheaper(st, 4, 4, m));
  st.kind = Kind::Reduce;
  EXPECT_DOUBLE_EQ(planned_cost(true), 3 * n / 4 * (0.125 + 0.5) + n / 4 * 0.125 + 2 * 7000);
  EXPECT_TRUE(model::shm_single_cheaper(st, 4, 4, m));
  st.count = 1024;  // 4 KiB: copy-in
  EXPECT_FALSE(model::shm_single_cheaper(st, 4, 4, m));
  st.count = int64_t{1} << 22;
  m.shm.single_ns_per_byte = 10;
  EXPECT_FALSE(model::shm_single_cheaper(st, 4, 4, m));
}

// The plan decides single copy and the step carries it (model::route_inside_nodes: Step::single,
// printed "via shm single"): HIER_SHM_CMA=on makes every large reduce-scatter / allgather of the
// node single copy even where the model prices it dearer, off none, auto the model's choice;
// the cost follows what the step carries.
TEST(ModelShm, ThePlanCarriesSingleCopy) {
  model::Model m = rates();
  m.shm.single_ns_per_byte = 10;  // dearer than copy-in: auto keeps copy-in
  const topo::Shape s = model::two_level(2, 4);
  auto routed = [&](config::ShmCma cma) {
    sched::Schedule x = sched::build_allreduce(s, 0, 1 << 22, false, sched::Algorithm::RsArAg, false);
    model::route_inside_nodes(x, s, 0, m, 4, cma);
    int shm = 0, single = 0;
    for (const sched::Step& st : x.steps) shm += st.via == sched::Via::Shm, single += st.single;
    EXPECT_GT(shm, 0);
    return std::make_pair(single, x);
  };
  const auto [on, on_s] = routed(config::ShmCma::On);
  EXPECT_EQ(on, 2) << sched::to_string(on_s);  // the node reduce-scatter and allgather
  EXPECT_NE(sched::to_string(on_s).find("via shm single"), std::string::npos);
  EXPECT_EQ(routed(config::ShmCma::Off).first, 0);
  EXPECT_EQ(routed(config::ShmCma::Auto).first, 0);
  const double dear = model::hier_cost({config::Coll::Allreduce, 4 << 22, 4}, s, m, sched::Algorithm::RsArAg, 1, true,
                                       config::ShmCma::On);
  EXPECT_GT(dear, model::hier_cost({config::Coll::Allreduce, 4 << 22, 4}, s, m, sched::Algorithm::RsArAg, 1, true,
                                   config::ShmCma::Auto));
}

// HIER_SHM=auto is not on: the planner weighs both transports and keeps messages where the
// segment is predicted slower (a slow flag round: small calls), the segment where it is
// predicted faster (fast copies: large calls); on routes always, off never.
TEST(ModelShm, AutoChoosesByTheModel) {
  model::Model m = rates();
  m.shm = {0.01, 0.01, 1e5, 4};  // a round of 100 us (messages: 1 us); moving bytes almost free
  const topo::Shape s = model::two_level(2, 4);
  config::Config cfg;
  cfg.algo[static_cast<size_t>(config::Coll::Allreduce)] = config::Algo::Hier;
  const model::Call small{config::Coll::Allreduce, 4096, 4}, large{config::Coll::Allreduce, 256 << 20, 4};
  cfg.shm = config::ShmMode::Auto;
  EXPECT_FALSE(model::plan(small, s, m, cfg).shm);
  EXPECT_TRUE(model::plan(large, s, m, cfg).shm);
  cfg.shm = config::ShmMode::On;
  EXPECT_TRUE(model::plan(small, s, m, cfg).shm);
  cfg.shm = config::ShmMode::Off;
  EXPECT_FALSE(model::plan(large, s, m, cfg).shm);
  // The prediction auto reports is the cheaper of the two.
  cfg.shm = config::ShmMode::Auto;
  const double a = model::plan(large, s, m, cfg).hier_ns;
  cfg.shm = config::ShmMode::Off;
  const double off = model::plan(large, s, m, cfg).hier_ns;
  cfg.shm = config::ShmMode::On;
  const double on = model::plan(large, s, m, cfg).hier_ns;
  EXPECT_DOUBLE_EQ(a, std::min(off, on));
  EXPECT_LT(on, off);
}

// A nonblocking call is planned from the MPI's nonblocking figures and libhier's (hier-tune
// measured both on the file's shape): flat where the MPI's own nonblocking call is faster,
// though libhier's blocking schedule beats the MPI's blocking call.
TEST(ModelShm, NonblockingPlannedFromItsOwnFigures) {
  model::Model m = rates();
  m.nodes = 2, m.ranks_per_node = 2;
  const size_t ar = static_cast<size_t>(config::Coll::Allreduce);
  m.flat_measured[ar] = {{65536, 4e6}, {16 << 20, 400e6}};
  m.hier_measured[ar] = {{65536, 2e6}, {16 << 20, 200e6}};     // blocking: libhier 2x faster
  m.flat_measured_nb[ar] = {{65536, 3e6}, {16 << 20, 160e6}};  // nonblocking: the MPI's own faster
  m.hier_measured_nb[ar] = {{65536, 5e6}, {16 << 20, 280e6}};
  const topo::Shape s = model::two_level(2, 2);
  config::Config cfg;
  model::Call call{config::Coll::Allreduce, 16 << 20, 4};
  model::Plan p = model::plan(call, s, m, cfg);
  EXPECT_NE(p.algo, sched::Algorithm::Flat) << model::describe(p);
  EXPECT_DOUBLE_EQ(p.hier_ns, 200e6);
  call.nonblocking = true;
  p = model::plan(call, s, m, cfg);
  EXPECT_EQ(p.algo, sched::Algorithm::Flat) << model::describe(p);
  EXPECT_DOUBLE_EQ(p.flat_ns, 160e6);
  EXPECT_DOUBLE_EQ(p.hier_ns, 280e6);
  // Where libhier's nonblocking schedule was measured faster, it stays hierarchical.
  m.hier_measured_nb[ar] = {{65536, 1e6}, {16 << 20, 100e6}};
  p = model::plan(call, s, m, cfg);
  EXPECT_NE(p.algo, sched::Algorithm::Flat) << model::describe(p);
}

// Without nonblocking figures for the shape (the built-in model, or another shape than the tune
// file's), a nonblocking allreduce is priced as its blocking rs-ar-ag schedule (its cross-node
// step runs as reduce-scatter + allgather for a nonblocking call too); any other nonblocking
// collective goes to the MPI's own call, though the blocking one is hierarchical; HIER_ALGO=hier
// still forces libhier's schedule.
TEST(ModelShm, NonblockingWithoutFigures) {
  model::Model m = rates();
  m.nodes = 2, m.ranks_per_node = 2;
  const size_t ar = static_cast<size_t>(config::Coll::Allreduce);
  const size_t ag = static_cast<size_t>(config::Coll::Allgather);
  m.flat_measured[ar] = {{65536, 4e6}, {16 << 20, 400e6}};
  m.hier_measured[ar] = {{65536, 2e6}, {16 << 20, 200e6}};
  m.flat_measured[ag] = {{65536, 4e6}, {16 << 20, 400e6}};
  m.hier_measured[ag] = {{65536, 2e6}, {16 << 20, 200e6}};
  config::Config cfg;
  for (const topo::Shape& s : {model::two_level(2, 2), model::two_level(4, 2)}) {
    model::Call call{config::Coll::Allreduce, 16 << 20, 4};
    model::Call blocking = call;
    call.nonblocking = true;
    const model::Plan b = model::plan(blocking, s, m, cfg), nb = model::plan(call, s, m, cfg);
    ASSERT_EQ(b.algo, sched::Algorithm::RsArAg) << model::describe(b);
    EXPECT_EQ(nb.algo, b.algo) << model::describe(nb);
    EXPECT_DOUBLE_EQ(nb.hier_ns, b.hier_ns);
    EXPECT_TRUE(nb.split_top) << "a nonblocking rs-ar-ag allreduce splits its cross-node step";
    EXPECT_FALSE(b.split_top) << "the blocking one keeps the MPI's allreduce there";
  }
  // On the measured shape (2 x 2): where the blocking schedule is not cheaper, neither is the
  // nonblocking one; the allgather's nonblocking schedule is not priced: the MPI's own call.
  const topo::Shape s22 = model::two_level(2, 2);
  model::Call call{config::Coll::Allreduce, 16 << 20, 4}, blocking = call;
  call.nonblocking = true;
  model::Model dear = m;
  dear.hier_measured[ar] = {{65536, 8e6}, {16 << 20, 800e6}};
  EXPECT_EQ(model::plan(blocking, s22, dear, cfg).algo, sched::Algorithm::Flat);
  EXPECT_EQ(model::plan(call, s22, dear, cfg).algo, sched::Algorithm::Flat) << model::describe(model::plan(call, s22, dear, cfg));
  model::Call gb{config::Coll::Allgather, 16 << 20, 1}, gnb = gb;
  gnb.nonblocking = true;
  EXPECT_NE(model::plan(gb, s22, m, cfg).algo, sched::Algorithm::Flat);
  EXPECT_EQ(model::plan(gnb, s22, m, cfg).algo, sched::Algorithm::Flat) << model::describe(model::plan(gnb, s22, m, cfg));
  // Nonblocking figures measured on 2 x 2 only (libhier's faster there): they decide on 2 x 2;
  // 4 x 2 has none, so the allgather stays with the MPI's own call there.
  m.flat_measured_nb[ag] = {{65536, 3e6}, {16 << 20, 300e6}};
  m.hier_measured_nb[ag] = {{65536, 1e6}, {16 << 20, 100e6}};
  EXPECT_NE(model::plan(gnb, model::two_level(2, 2), m, cfg).algo, sched::Algorithm::Flat);
  EXPECT_EQ(model::plan(gnb, model::two_level(4, 2), m, cfg).algo, sched::Algorithm::Flat);
  cfg.algo.fill(config::Algo::Hier);
  EXPECT_NE(model::plan(gnb, model::two_level(4, 2), m, cfg).algo, sched::Algorithm::Flat);
}

}  // namespace

// What HIER_SHM=auto, the default, plans from the built-in models on the emulated cluster's 2 x 4
// (float32 reductions, bytes per rank from 4 KiB to 16 MiB; F: the MPI's own call, H: libhier's
// schedule, Hn: in n chunks, s: its node steps through the segment).
std::string auto_decisions(model::Family f, config::Coll c) {
  const model::Model& m = model::builtin(f);
  const config::Config cfg;  // the defaults: HIER_SHM=auto
  const topo::Shape s = model::two_level(2, 4);
  const bool reduction = c == config::Coll::Allreduce || c == config::Coll::ReduceScatterBlock || c == config::Coll::Reduce;
  std::string out;
  for (int64_t b = 4096; b <= (int64_t{16} << 20); b *= 4) {
    const model::Plan p = model::plan({c, c == config::Coll::Barrier ? 0 : b, reduction ? 4 : 1}, s, m, cfg);
    if (!out.empty()) out += ' ';
    out += p.algo == sched::Algorithm::Flat ? "F" : p.chunks > 1 ? "H" + std::to_string(p.chunks) : "H";
    if (p.algo != sched::Algorithm::Flat && p.shm) out += 's';
  }
  return out;
}

TEST(ModelShm, BuiltinDecisionsUnderAuto) {
  using config::Coll;
  using F = model::Family;
  // Every size from 4 KiB: with the built-in rates (no tune file) a node step through the segment
  // costs a copy, a fold and a 20 us flag round, below the MPI's messages inside the node, which
  // makes the hierarchical schedule the cheaper one at every size (measured idle against the MPI
  // alone, bench/RESULTS.md "HIER_SHM=auto across sizes": 2-6x at 4 KiB-1 MiB on this machine, but
  // for MPICH's 4 KiB bcast, 0.54x). Session 18 tried built-in shm rates measured with every member
  // active (2 ms a round) and steps.eager_bytes for MPICH: idle, MPICH's 16 KiB bcast then chose
  // scatter-allgather at 15.9 ms instead of two-step at 0.23 ms, and the flat 4/8 KiB plan was no
  // faster, so the built-ins kept these rates (bench/RESULTS.md, "Session 18, lead"). 4K 16K 64K 256K 1M 4M 16M
  for (F f : {F::OpenMPI, F::Mpich}) {
    EXPECT_EQ(auto_decisions(f, Coll::Allreduce),                  "Hs Hs Hs Hs Hs Hs Hs");
    EXPECT_EQ(auto_decisions(f, Coll::ReduceScatterBlock),         "Hs Hs Hs Hs Hs Hs Hs");
    EXPECT_EQ(auto_decisions(f, Coll::Allgather),                  "Hs Hs Hs Hs Hs Hs Hs");
    EXPECT_EQ(auto_decisions(f, Coll::Reduce),                     "Hs Hs Hs Hs Hs Hs Hs");
    EXPECT_EQ(auto_decisions(f, Coll::Barrier),                    "Hs Hs Hs Hs Hs Hs Hs");
  }
  EXPECT_EQ(auto_decisions(F::OpenMPI, Coll::Bcast),               "Hs Hs Hs Hs Hs H2s Hs");
  EXPECT_EQ(auto_decisions(F::Mpich, Coll::Bcast),                 "Hs Hs Hs Hs Hs Hs Hs");
  // HIER_SHM=off plans as before (model_test.cpp's BuiltinDecisionsOnTheEmulatedCluster).
}

// A binomial bcast of eager messages (Model::eager_bytes) costs its transfers, no wake-up per
// round: the same bcast above the limit, or with no limit, pays a latency per round.
TEST(ModelShm, EagerBcastPaysNoWakeUp) {
  model::Model m = model_testing::simple();
  m.flat_algorithms[static_cast<size_t>(config::Coll::Bcast)] = {{std::numeric_limits<int64_t>::max(), model::Algo::Binomial}};
  const double waited = model::flat_algo_cost(config::Coll::Bcast, 4096, 2, 4, m);
  m.eager_bytes = 8192;
  const double eager = model::flat_algo_cost(config::Coll::Bcast, 4096, 2, 4, m);
  // 3 rounds: across nodes (10 us + 10 ns/B), then twice inside (1 us + 1 ns/B): less the latencies.
  EXPECT_NEAR(waited, 10000 + 40960 + 2 * (1000 + 4096), 1);
  EXPECT_NEAR(eager, 40960 + 2 * 4096, 1);
  EXPECT_NEAR(model::flat_algo_cost(config::Coll::Bcast, 16384, 2, 4, m), 10000 + 163840 + 2 * (1000 + 16384), 1);
  // Only the binomial tree: the scatter-allgather's exchanges wait whatever the size.
  m.flat_algorithms[static_cast<size_t>(config::Coll::Bcast)] = {{std::numeric_limits<int64_t>::max(), model::Algo::ScatterAllgather}};
  const double sag = model::flat_algo_cost(config::Coll::Bcast, 4096, 2, 4, m);
  m.eager_bytes = 0;
  EXPECT_EQ(sag, model::flat_algo_cost(config::Coll::Bcast, 4096, 2, 4, m));
}

namespace {
// A 16 MiB float allreduce quantized int8 on 2 x 4, node steps through the segment.
struct QuantCase {
  topo::Shape s = model::two_level(2, 4);
  model::Call call{config::Coll::Allreduce, 16 << 20, 4};
  config::Config cfg;
  QuantCase() {
    cfg.quant[static_cast<size_t>(config::Coll::Allreduce)] = config::Quant::Int8;
    cfg.shm = config::ShmMode::On;
  }
  double cost(const model::Model& m, int chunks) const {
    return model::quant_cost(call.coll, call.bytes, 4, s, m, 8, cfg.quant_block, chunks, true);
  }
};
}  // namespace

// The quantized schedule pipelined (docs/shm.md, "Pipelining"): HIER_CHUNK=auto offers 2, 4 and
// 8 chunks besides the model's sizes, and a wave's step through the segment, folds included,
// overlaps the cross messages of the older chunks. Where the node's work is slow against the
// link's rounds, chunks pay and are chosen; with rounds of milliseconds (the built-in Open MPI
// model: 8 ranks polling on 2 cores), every chunk's rounds cost more than the overlap saves.
TEST(ModelShm, QuantChunksPickedWhereTheOverlapPays) {
  QuantCase q;
  const std::vector<int> offered = model::quant_chunk_options(q.call, q.s.size, model::builtin(model::Family::OpenMPI), q.cfg);
  for (int c : {1, 2, 4, 8}) EXPECT_NE(std::find(offered.begin(), offered.end(), c), offered.end()) << c;
  model::Model m = model::builtin(model::Family::OpenMPI);
  model::Plan p = model::plan(q.call, q.s, m, q.cfg);
  EXPECT_EQ(p.quant_bits, 8) << model::describe(p);
  EXPECT_EQ(p.quant_chunks, 1) << model::describe(p);
  EXPECT_GT(q.cost(m, 4), q.cost(m, 1));
  // Fast rounds, a node whose segment steps take long (its cores shared): the node work of one
  // chunk hides under the link's transfers of another.
  m.inter.latency_ns = m.intra.latency_ns = 50000;
  m.shm.copy_ns_per_byte = 0.5;
  m.shm.reduce_ns_per_byte = 1.0;
  EXPECT_LT(q.cost(m, 8), q.cost(m, 1));
  p = model::plan(q.call, q.s, m, q.cfg);
  EXPECT_GT(p.quant_chunks, 1) << model::describe(p);
  EXPECT_DOUBLE_EQ(p.quant_ns, q.cost(m, p.quant_chunks));
  // HIER_CHUNK given: that one only.
  q.cfg.chunk_bytes = 0;
  EXPECT_EQ(model::quant_chunk_options(q.call, q.s.size, m, q.cfg), std::vector<int>{1});
}
