// The planner's costs of device-bound schedules (model/cost_device.hpp): the module's kernels and
// the stream waits on a GPU-aware MPI, the staged copies on one that is not, priced from the tune
// file's "device" section (or the assumed built-ins), and the decisions they change.
#include <gtest/gtest.h>

#include <string>

#include "model/cost.hpp"
#include "model/cost_device.hpp"
#include "model/plan.hpp"
#include "model/shapes.hpp"
#include "model/tune_schema.hpp"
#include "model_testing.hpp"
#include "sched/build.hpp"

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
