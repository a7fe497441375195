// The planner's costs of device-bound schedules (model/cost_device.hpp): the module's kernels and
// the stream waits on a GPU-aware MPI, the staged copies on one that is not, priced from the tune
// file's "device" section (or the assumed built-ins), and the decisions they change.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/cost.hpp"
#include "model/cost_device.hpp"
#include "model/plan.hpp"
#include "model/shapes.hpp"
#include "model/tune_schema.hpp"
#include "model_testing.hpp"
#include "sched/build.hpp"
#include "sched/pieces.hpp"

namespace {

using hier::config::Coll;
using hier::model::Placement;
using hier::model_testing::messages;
using hier::model_testing::simple;
using hier::sched::Algorithm;
namespace model = hier::model;
namespace sched = hier::sched;

// Round device rates: a kernel or copy queued and waited for 100 ns, copies to and from the host
// 1 and 2 ns/B, everything else free.
model::DeviceRates round_rates() {
  model::DeviceRates r;
  r.step_ns = 100;
  r.d2h_ns_per_byte = 1;
  r.h2d_ns_per_byte = 2;
  return r;
}

// By hand: a staged allreduce step of 1000 floats copies 4000 B in (1 ns/B) and 4000 B out
// (2 ns/B) and waits three times (before, after the copy in, after the copies back):
// 3 x 100 + 4000 + 8000; on a GPU-aware MPI only the wait before it; on the host nothing.
TEST(CostDevice, MessageStepByHand) {
  model::Model m = simple();
  m.device = round_rates();
  sched::Step st;
  st.kind = sched::Kind::Allreduce;
  st.count = 1000;
  EXPECT_DOUBLE_EQ(model::device_message_ns(st, 2, 4, m), 0.0);
  EXPECT_DOUBLE_EQ(model::device_message_ns(st, 2, 4, model::on_device(m, Placement::Device)), 100.0);
  EXPECT_DOUBLE_EQ(model::device_message_ns(st, 2, 4, model::on_device(m, Placement::Staged)), 12300.0);
  // An allgather step of 1000 B among 4: 1000 B in, 4000 B out.
  st.kind = sched::Kind::Allgather;
  EXPECT_DOUBLE_EQ(model::device_message_ns(st, 4, 1, model::on_device(m, Placement::Staged)), 300.0 + 1000 + 8000);
  EXPECT_DOUBLE_EQ(model::device_local_ns(model::on_device(m, Placement::Device)), 100.0);
  EXPECT_DOUBLE_EQ(model::device_local_ns(m), 0.0);
}

// What the model prices a staged step's copies at, isolated: bytes in (device -> host, 1 ns/B)
// and bytes out (host -> device, 1 ns/B), no waits.
struct Priced {
  double in = 0, out = 0;
};
Priced priced(const sched::Step& st, int members, int64_t ub) {
  model::Model m = model::on_device(simple(), Placement::Staged);
  m.device = model::DeviceRates{};
  m.device.step_ns = 0;
  m.device.d2h_ns_per_byte = 1, m.device.h2d_ns_per_byte = 0;
  Priced p;
  p.in = model::device_message_ns(st, members, ub, m);
  m.device.d2h_ns_per_byte = 0, m.device.h2d_ns_per_byte = 1;
  p.out = model::device_message_ns(st, members, ub, m);
  return p;
}

// What exec/device_stage.cpp copies for step st with every buffer on the device, on each rank of
// its `members`: the pieces read (copied in before the PMPI call) and written (copied back after
// it), walked by sched::for_each_piece as stage_in / stage_out walk them. The most over the ranks
// of each side is what the model must price.
Priced staged_by_every_rank(const sched::Step& st, int members, int64_t ub) {
  Priced most;
  for (int me = 0; me < members; ++me) {
    double in = 0, out = 0;
    sched::for_each_piece(st, sched::piece_view(st, me, members, ub), [&](sched::Side side, int64_t, int64_t bytes) {
      (side == sched::Side::WriteDst ? out : in) += static_cast<double>(bytes);
    });
    most.in = std::max(most.in, in);
    most.out = std::max(most.out, out);
  }
  return most;
}

// By hand, the case the model's own rule got wrong: a gatherv of counts {1, 2, 3, 4} floats
// among 4, root 0 in place. The root copies in only its own piece (4 B) and back the whole
// gather (40 B); the busiest sender copies in 16 B. In: 16 B, out: 40 B (the model's former
// rule priced 40 B in as well).
TEST(CostDevice, StagedGathervByHand) {
  sched::Step st;
  st.kind = sched::Kind::Gatherv;
  st.comm.on = sched::On::Node;
  st.in_place = true;
  st.counts = {1, 2, 3, 4};
  st.displs = {0, 1, 3, 6};
  const Priced p = priced(st, 4, 4);
  EXPECT_DOUBLE_EQ(p.in, 16.0);
  EXPECT_DOUBLE_EQ(p.out, 40.0);
}

// The model's staged bytes equal what the stager copies, step by step, on the busiest rank of
// each side, for the message steps of every rank's schedule of a few collectives on 2 x 4 and
// 3 x 3 (uneven counts, roots, in place, steps on records), and for each kind with counts that
// favour no rank.
TEST(CostDevice, StagedBytesAreTheStagersCopies) {
  using sched::Algorithm;
  std::vector<sched::Schedule> all;
  for (const hier::topo::Shape& s : {model::two_level(2, 4), model::two_level(3, 3)}) {
    const int n = s.size;
    std::vector<int64_t> uneven(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) uneven[r] = 7 + 5 * r;
    for (int r = 0; r < n; ++r) {
      all.push_back(sched::build_allreduce(s, r, 1001, r % 2 == 0, Algorithm::RsArAg, false));
      all.push_back(sched::build_reduce_scatter(s, r, uneven, false));
      all.push_back(sched::build_allgather(s, r, uneven));
      for (Algorithm a : {Algorithm::ScatterAllgather, Algorithm::TwoStep, Algorithm::Tree})
        all.push_back(sched::build_bcast(s, r, 4099, n - 1, a));
      for (Algorithm a : {Algorithm::RsReduceGather, Algorithm::TwoStep, Algorithm::Tree})
        all.push_back(sched::build_reduce(s, r, 999, 1, r == 1, a));
      all.push_back(sched::build_alltoall(s, r, 37));
      all.push_back(sched::build_gather(s, r, 53, 2));
      all.push_back(sched::build_scatter(s, r, 53, 2, r == 2));
      all.push_back(sched::build_barrier(s, r));
    }
  }
  int steps = 0;
  for (const sched::Schedule& sc : all)
    for (const sched::Step& st : sc.steps) {
      if (st.comm.on == sched::On::None) continue;
      const int members = st.counts.empty() ? 4 : static_cast<int>(st.counts.size());
      const int64_t ub = sc.unit == sched::Unit::Bytes ? 1 : 4;
      const Priced model = priced(st, members, ub), stager = staged_by_every_rank(st, members, ub);
      EXPECT_DOUBLE_EQ(model.in, stager.in) << sc.name << ": " << sched::to_string(st.kind);
      EXPECT_DOUBLE_EQ(model.out, stager.out) << sc.name << ": " << sched::to_string(st.kind);
      ++steps;
    }
  EXPECT_GT(steps, 100);
  // Every kind with a PMPI call, on counts largest at a rank that is not the root.
  for (sched::Kind k : {sched::Kind::ReduceScatter, sched::Kind::Allreduce, sched::Kind::Allgather,
                        sched::Kind::Allgatherv, sched::Kind::Bcast, sched::Kind::Scatterv, sched::Kind::Gatherv,
                        sched::Kind::Reduce, sched::Kind::Alltoall, sched::Kind::Alltoallv, sched::Kind::Send,
                        sched::Kind::Recv})
    for (bool in_place : {false, true}) {
      sched::Step st;
      st.kind = k;
      st.comm.on = sched::On::Node;
      st.in_place = in_place;
      st.count = 11;
      st.root = 1;
      st.counts = {3, 1, 9, 2, 5};
      st.displs = {0, 3, 4, 13, 15};
      st.rcounts = {2, 2, 8, 1, 1};
      st.rdispls = {0, 2, 4, 12, 13};
      const Priced model = priced(st, 5, 8), stager = staged_by_every_rank(st, 5, 8);
      EXPECT_DOUBLE_EQ(model.in, stager.in) << sched::to_string(k) << (in_place ? " in place" : "");
      EXPECT_DOUBLE_EQ(model.out, stager.out) << sched::to_string(k) << (in_place ? " in place" : "");
    }
}

// The flat path on a staged communicator copies the whole buffers: an allreduce of 4096 B both
// ways (2 waits + 4096 x 1 + 4096 x 2), an allgather of 4096 B in all among 4 ranks a quarter in.
TEST(CostDevice, StagedFlatCopiesByHand) {
  model::Model m = model::on_device(simple(), Placement::Staged);
  m.device = round_rates();
  EXPECT_DOUBLE_EQ(model::device_flat_ns(Coll::Allreduce, 4096, 4, m), 200.0 + 4096 + 8192);
  EXPECT_DOUBLE_EQ(model::device_flat_ns(Coll::Allgather, 4096, 4, m), 200.0 + 1024 + 8192);
  EXPECT_DOUBLE_EQ(model::device_flat_ns(Coll::Allreduce, 4096, 4, model::on_device(simple(), Placement::Device)), 0.0);
}

// A schedule's cost on the device: its local steps at the device's copy rate plus one wait each,
// its message steps one wait each; the host cost of the same schedule has neither.
TEST(CostDevice, ScheduleCostAddsKernelsAndWaits) {
  model::Model m = simple();
  m.copy_ns_per_byte = 1.0;  // host copies 1 ns/B
  m.device = round_rates();
  m.device.copy_ns_per_byte = 0.25;
  const hier::topo::Shape s = model::two_level(2, 2);
  const sched::Schedule sc = model::build_for({Coll::Allreduce, 4096, 4}, s, 0, Algorithm::RsArAg, 1, m);
  int local = 0, messages_n = 0;
  double local_bytes = 0;
  for (const sched::Step& st : sc.steps) {
    const bool is_local = st.kind == sched::Kind::Copy || st.kind == sched::Kind::LoadBlock ||
                          st.kind == sched::Kind::StoreBlock;
    if (is_local) ++local, local_bytes += static_cast<double>(st.count * 4);
    else ++messages_n;
  }
  ASSERT_GT(messages_n, 0);
  const double host = model::cost({sc}, 0, s, m, 4);
  const double dev = model::cost({sc}, 0, s, model::on_device(m, Placement::Device), 4);
  EXPECT_DOUBLE_EQ(dev - host, (local + messages_n) * 100.0 - local_bytes * 0.75);
}

// A staged communicator whose copies to and from the host are slow: each of the hierarchical
// schedule's message steps copies its bytes (about 3x the vector for rs-ar-ag on 2 x 4: the node
// reduce-scatter's input, the shards, the node allgather's output), the flat path the vector
// twice; the planner then keeps the MPI's own call, where on host buffers (and with the built-in
// device rates) it goes hierarchical. Nothing else differs between the runs.
TEST(CostDevice, SlowStagingCopiesKeepTheMpi) {
  const hier::topo::Shape s = model::two_level(2, 4);
  model::Model m = simple();
  hier::config::Config cfg = messages();
  model::Call call{Coll::Allreduce, 1 << 20, 4};
  ASSERT_NE(model::plan(call, s, m, cfg).algo, Algorithm::Flat) << "the host plan must be hierarchical";
  call.where = Placement::Staged;
  EXPECT_NE(model::plan(call, s, m, cfg).algo, Algorithm::Flat) << "built-in device rates";
  m.device.h2d_ns_per_byte = m.device.d2h_ns_per_byte = 50;  // slower than the network (10 ns/B)
  const model::Plan p = model::plan(call, s, m, cfg);
  EXPECT_EQ(p.algo, Algorithm::Flat) << model::describe(p);
  EXPECT_GT(p.hier_ns, p.flat_ns);
}

// On a GPU-aware MPI a device with a slow launch (1 ms a kernel or wait) makes a small call's
// hierarchical schedule, whose steps each wait, lose to the MPI's own.
TEST(CostDevice, SlowKernelsKeepSmallCallsFlat) {
  const hier::topo::Shape s = model::two_level(2, 4);
  model::Model m = simple();
  hier::config::Config cfg = messages();
  model::Call call{Coll::Allreduce, 64 << 10, 4};
  ASSERT_NE(model::plan(call, s, m, cfg).algo, Algorithm::Flat);
  call.where = Placement::Device;
  m.device.step_ns = 1e6;
  EXPECT_EQ(model::plan(call, s, m, cfg).algo, Algorithm::Flat);
}

// The same decision from a tune file: its "device" section is what the planner reads; without
// one, the built-in rates (the hierarchical plan stays).
TEST(CostDevice, DecisionFollowsTheTuneFile) {
  const hier::topo::Shape s = model::two_level(2, 4);
  model::Model m = simple();
  m.family = model::Family::OpenMPI;
  m.nodes = 2, m.ranks_per_node = 4;
  model::TuneDoc d;
  d.model = m;
  d.model.device.h2d_ns_per_byte = d.model.device.d2h_ns_per_byte = 50;
  d.model.device.measured = true;
  d.has.flat_algorithms = d.has.margin = d.has.step_overhead = d.has.pipeline = true;
  hier::config::Config cfg = messages();
  model::Call call{Coll::Allreduce, 1 << 20, 4};
  call.where = Placement::Staged;
  for (bool with_device : {true, false}) {
    d.has.device = with_device;
    model::TuneFile f;
    std::string err;
    ASSERT_TRUE(model::parse(model::write(d), model::Family::OpenMPI, {2, 4}, m, f, err)) << err;
    const model::Plan p = model::plan(call, s, f.model, cfg);
    EXPECT_EQ(p.algo == Algorithm::Flat, with_device) << model::describe(p);
  }
}

}  // namespace
