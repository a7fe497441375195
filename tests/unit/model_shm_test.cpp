// HIER_SHM in the model (docs/shm.md): a level step marked Via::Shm is costed from the copy and
// reduction rates and the flag rounds (shm_round_ns per slot half), not as the MPI's messages;
// the planner routes the steps inside a node when HIER_SHM is on, and only those.
#include <gtest/gtest.h>

#include "model/cost.hpp"
#include "model/plan.hpp"
#include "model/shapes.hpp"
#include "model_testing.hpp"
#include "sched/build.hpp"
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
  model::route_inside_nodes(x, s);
  int shm = 0;
  for (const sched::Step& st : x.steps) {
    if (st.comm.on == sched::On::Step && st.comm.level == 1) EXPECT_EQ(st.via, sched::Via::Mpi) << sched::to_string(x);
    shm += st.via == sched::Via::Shm;
  }
  EXPECT_GE(shm, 2) << sched::to_string(x);  // the node reduce-scatter and allgather
  // The planner's prediction changes with HIER_SHM (the node steps are costed from the rates).
  const model::Model m = rates();
  const model::Call call{config::Coll::Allreduce, 64 << 20, 4};
  EXPECT_NE(model::hier_cost(call, s, m, sched::Algorithm::RsArAg, 1, true),
            model::hier_cost(call, s, m, sched::Algorithm::RsArAg, 1, false));
}

}  // namespace
