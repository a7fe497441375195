// The schedule the model costed is the schedule the executor ran, step for step (issue 28): for a
// sweep of calls (every collective of config/collectives.def, sizes from a few bytes to
// megabytes, the shapes of the variants), each call runs through its executor entry point
// (exec::<key>, without the wrappers), and the schedule it ran, the one its communicator's cache
// holds, is compared with what the planner's cost function built for that call and this rank:
// model::build_for with the call's plan (algorithm, chunks, level-step thresholds). The
// thresholds alone agreeing (Planner.CostsTheLevelStepsThatRun) would not show that the
// executor builds what the planner priced: this does, for every step of every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "exec/context.hpp"
#include "exec/entry.hpp"
#include "exec/executor.hpp"
#include "exec/shm_steps.hpp"
#include "config/config.hpp"
#include "model/cost.hpp"
#include "model/cost_quant.hpp"
#include "model/load.hpp"
#include "model/plan.hpp"
#include "sched/ir.hpp"

namespace hier::exec {
namespace {

using config::Coll;

int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c) {
  int p = 0;
  MPI_Comm_size(c, &p);
  return p;
}

// One call of `coll` with n ints per rank's block (or buffer), rooted at 0, never in place:
// the form the planner costs (model/plan.cpp: build_one). Returns what the entry point returned.
std::optional<Ran> call(Coll coll, int n, MPI_Comm c) {
  const int P = size_of(c);
  std::vector<int> in(static_cast<size_t>(n) * P + 1, 3), out(static_cast<size_t>(n) * P + 1, 0);
  std::vector<int> counts(P, n), displs(P);
  for (int r = 0; r < P; ++r) displs[r] = r * n;
  switch (coll) {
    case Coll::Allreduce: return allreduce(in.data(), out.data(), n, MPI_INT, MPI_SUM, c);
    case Coll::ReduceScatterBlock: return reduce_scatter_block(in.data(), out.data(), n, MPI_INT, MPI_SUM, c);
    case Coll::ReduceScatter: return reduce_scatter(in.data(), out.data(), counts.data(), MPI_INT, MPI_SUM, c);
    case Coll::Allgather: return allgather(in.data(), n, MPI_INT, out.data(), n, MPI_INT, c);
    case Coll::Allgatherv: return allgatherv(in.data(), n, MPI_INT, out.data(), counts.data(), displs.data(), MPI_INT, c);
    case Coll::Bcast: return bcast(in.data(), n, MPI_INT, 0, c);
    case Coll::Reduce: return reduce(in.data(), out.data(), n, MPI_INT, MPI_SUM, 0, c);
    case Coll::Barrier: return barrier(c);
    case Coll::Alltoall: return alltoall(in.data(), n, MPI_INT, out.data(), n, MPI_INT, c);
    case Coll::Gather: return gather(in.data(), n, MPI_INT, out.data(), n, MPI_INT, 0, c);
    case Coll::Scatter: return scatter(in.data(), n, MPI_INT, out.data(), n, MPI_INT, 0, c);
    case Coll::Count: break;
  }
  // A row of the table without its call here: this test must learn it (it fails until then).
  ADD_FAILURE() << config::coll_key(coll) << ": no call in tests/coll/test_costed.cpp";
  return std::nullopt;
}

// The bytes and element size the entry point plans with (exec/coll_*.cpp: prepare).
model::Call planned(Coll coll, int n, int P) {
  const int64_t b = int64_t{n} * 4;
  switch (coll) {
    case Coll::Allreduce:
    case Coll::Reduce: return {coll, b, 4};
    case Coll::ReduceScatterBlock:
    case Coll::ReduceScatter: return {coll, b * P, 4};
    case Coll::Bcast: return {coll, b, 1};
    case Coll::Barrier: return {coll, 0, 1};
    default: return {coll, b * P, 1};  // the byte schedules: every rank's block
  }
}

// Everything a step does, as the IR prints it (kind, communicator, buffers, counts, root, wave).
std::string steps_of(const sched::Schedule& s) {
  std::string out = sched::to_string(s);
  out += " direct_rs_from " + std::to_string(s.direct_rs_from) + " padded_agv_from " + std::to_string(s.padded_agv_from);
  return out;
}

// A fresh cache: the one entry after a call is the schedule that call ran.
void clear(Context& ctx) {
  while (ctx.cache.size() > 0) {
    sched::Key first;
    ctx.cache.each([&](const sched::Key& key, const sched::Cache::Entry&) { first = key; });
    ctx.cache.erase(first);
  }
}
// The schedule of the one cache entry (its first variant: the dense-layout form); null when the
// cache holds another number of entries.
const sched::Schedule* the_one_cached(Context& ctx) {
  if (ctx.cache.size() != 1) return nullptr;
  const sched::Schedule* s = nullptr;
  ctx.cache.each([&](const sched::Key&, const sched::Cache::Entry& e) { s = e.variant[0].get(); });
  return s;
}

// The plan's shm steps of a schedule (Via::Shm), and of those single copy (Step::single).
struct ShmPlanned {
  uint64_t steps = 0, single = 0;
};
ShmPlanned shm_planned(const sched::Schedule& s) {
  ShmPlanned n;
  for (const sched::Step& st : s.steps)
    if (st.via == sched::Via::Shm) ++n.steps, n.single += st.single;
  return n;
}

// What the executor ran of the plan's shm steps (the counts of the report's shm section before
// and after the call): every one through the segment, in the form the plan chose (single copy
// run copy-in only where the kernel refuses it on this machine, counted). Returns what it saw.
ShmPlanned expect_ran_as_planned(const sched::Schedule& planned, const ShmCounts& before, const std::string& what) {
  const ShmCounts after = shm_counts();
  const ShmPlanned want = shm_planned(planned);
  EXPECT_EQ(after.no_segment - before.no_segment, 0u) << what << ": a planned shm step found no segment";
  EXPECT_EQ(after.declined - before.declined, 0u) << what << ": a planned shm step was declined";
  EXPECT_EQ(after.steps - before.steps, want.steps) << what << ": shm steps run";
  EXPECT_EQ(after.single - before.single + after.single_refused - before.single_refused, want.single)
      << what << ": single-copy steps run (or refused by the kernel)";
  EXPECT_EQ(after.not_dense - before.not_dense, 0u) << what;
  return want;
}

TEST(CostedIsRun, EveryCollectiveAndSize) {
  MPI_Comm c = MPI_COMM_WORLD;
  const int rank = rank_of(c), P = size_of(c);
  const config::Config& cfg = config::get();
  int compared = 0;
  uint64_t shm_steps = 0, single_steps = 0;
  for (int k = 0; k < static_cast<int>(Coll::Count); ++k) {
    const Coll coll = static_cast<Coll>(k);
    for (int n : {1, 37, 4096, 300007}) {
      if (coll == Coll::Barrier && n != 1) continue;
      if (coll == Coll::Alltoall && n > 4096) continue;  // scratch of two copies
      Context* ctx = context_of(c);
      ASSERT_NE(ctx, nullptr);
      clear(*ctx);
      const std::string what = std::string(config::coll_key(coll)) + " n=" + std::to_string(n) + " rank " +
                               std::to_string(rank);
      const ShmCounts before = shm_counts();
      const std::optional<Ran> ran = call(coll, n, c);
      const model::Call mc = planned(coll, n, P);
      // (coll, bytes, elem_size, quantizable, nonblocking): exact blocking calls.
      const auto plan_it = ctx->plans.find(std::make_tuple(static_cast<int>(coll), mc.bytes, mc.elem_size, false, false));
      if (!ran) {  // left to the MPI: the plan said flat, or there was no plan
        EXPECT_TRUE(plan_it == ctx->plans.end() || plan_it->second.algo == sched::Algorithm::Flat) << what;
        continue;
      }
      ASSERT_EQ(ran->rc, MPI_SUCCESS) << what;
      ASSERT_NE(plan_it, ctx->plans.end()) << what << ": ran without the plan this test looks for";
      const sched::Schedule* ran_s = the_one_cached(*ctx);
      ASSERT_NE(ran_s, nullptr) << what << ": not the one schedule in the cache";
      const model::Plan& plan = plan_it->second;
      sched::Schedule costed =
          model::build_for(mc, ctx->levels->shape, rank, plan.algo, plan.chunks, model::process().model);
      // Routed through the node segments where the plan chose them, each step single copy or
      // copy-in as the plan chose (the model's routing, model::route_inside_nodes, as
      // model::hier_cost costs it); the executor must have run exactly that.
      if (plan.shm && !ctx->device_hier)
        model::route_inside_nodes(costed, ctx->levels->shape, rank, model::process().model,
                                  std::max<int64_t>(mc.elem_size, 1), cfg.shm_cma);
      EXPECT_EQ(steps_of(*ran_s), steps_of(costed)) << what << ": the executor ran another schedule than the model costed";
      const ShmPlanned shm = expect_ran_as_planned(costed, before, what);
      shm_steps += shm.steps;
      single_steps += shm.single;
      ++compared;
    }
  }
  // Under HIER_SHM=on (the shm variant) the sweep ran shm steps, and under HIER_SHM_CMA=on
  // single-copy ones among them.
  if (cfg.shm == config::ShmMode::On && !context_of(c)->levels->segments.empty()) {
    EXPECT_GT(shm_steps, 0u);
  }
  if (cfg.shm == config::ShmMode::On && cfg.shm_cma == config::ShmCma::On && !context_of(c)->levels->segments.empty()) {
    EXPECT_GT(single_steps, 0u);
  }
  if (rank == 0) std::printf("shm steps %llu, of which single copy %llu\n", static_cast<unsigned long long>(shm_steps),
                             static_cast<unsigned long long>(single_steps));
  // The sweep compared something on every shape it runs on (HIER_ALGO=hier: the tree
  // collectives run on any shape).
  EXPECT_GT(compared, 8);
  if (rank == 0) std::printf("compared %d schedules with what the model costed\n", compared);
}

// One float MPI_SUM call (an allgather of floats) of `coll` with n values per rank's block (the
// allreduce: per rank), never in place: a call the planner may quantize (model::Call::quantizable).
std::optional<Ran> quant_call(Coll coll, int n, MPI_Comm c) {
  const int P = size_of(c);
  std::vector<float> in(static_cast<size_t>(n) * P + 1, 1.5f), out(static_cast<size_t>(n) * P + 1, 0.f);
  std::vector<int> counts(P, n);
  switch (coll) {
    case Coll::Allreduce: return allreduce(in.data(), out.data(), n, MPI_FLOAT, MPI_SUM, c);
    case Coll::ReduceScatterBlock: return reduce_scatter_block(in.data(), out.data(), n, MPI_FLOAT, MPI_SUM, c);
    case Coll::ReduceScatter: return reduce_scatter(in.data(), out.data(), counts.data(), MPI_FLOAT, MPI_SUM, c);
    case Coll::Allgather: return allgather(in.data(), n, MPI_FLOAT, out.data(), n, MPI_FLOAT, c);
    default: break;
  }
  // A row the table quantizes without its call here: this test must learn it.
  ADD_FAILURE() << config::coll_key(coll) << ": a quantized row without its call in tests/coll/test_costed.cpp";
  return std::nullopt;
}

// The quantized schedules: for every row the table quantizes and HIER_QUANT turns on (the
// two-level variant names int8 for some rows and int4 for others, with HIER_CHUNK so that the
// pipelined ones are cut in chunks), a float call at and above the quantization floor runs the
// schedule model/cost_quant.cpp costed for the plan's bits and chunks (model::build_quant_for),
// step for step, on every rank.
TEST(CostedIsRun, Quantized) {
  MPI_Comm c = MPI_COMM_WORLD;
  const int rank = rank_of(c), P = size_of(c);
  const config::Config& cfg = config::get();
  Context* ctx = context_of(c);
  ASSERT_NE(ctx, nullptr);
  const topo::Shape& shape = ctx->levels->shape;
  if (!shape.cartesian || shape.nlevels() != 2) GTEST_SKIP() << "quantized schedules need a cartesian 2-level shape";
  int compared = 0, asked = 0;
  for (int k = 0; k < static_cast<int>(Coll::Count); ++k) {
    const Coll coll = static_cast<Coll>(k);
    const config::Quant mode = cfg.quant_for(coll);
    if (!config::quantizable(coll) || mode == config::Quant::Off) continue;
    ++asked;
    const int bits = mode == config::Quant::Int8 ? 8 : 4;
    for (int n : {4096, 300007}) {
      clear(*ctx);
      const std::string what = std::string(config::coll_key(coll)) + " int" + std::to_string(bits) + " n=" +
                               std::to_string(n) + " rank " + std::to_string(rank);
      const ShmCounts before = shm_counts();
      const std::optional<Ran> ran = quant_call(coll, n, c);
      ASSERT_TRUE(ran.has_value()) << what << ": left to the MPI (HIER_ALGO=hier quantizes what it may)";
      ASSERT_EQ(ran->rc, MPI_SUCCESS) << what;
      const int64_t bytes = int64_t{n} * 4 * (coll == Coll::Allreduce ? 1 : P);
      const model::Call mc{coll, bytes, 4};
      // (coll, bytes, elem_size, quantizable, nonblocking)
      const auto plan_it = ctx->plans.find(std::make_tuple(static_cast<int>(coll), mc.bytes, mc.elem_size, true, false));
      ASSERT_NE(plan_it, ctx->plans.end()) << what << ": ran without the plan this test looks for";
      const model::Plan& plan = plan_it->second;
      ASSERT_EQ(plan.quant_bits, bits) << what << ": the plan did not quantize";
      const sched::Schedule* ran_s = the_one_cached(*ctx);
      ASSERT_NE(ran_s, nullptr) << what << ": not the one schedule in the cache";
      sched::Schedule costed = model::build_quant_for(mc, shape, rank, plan.quant_bits, cfg.quant_block,
                                                      plan.quant_chunks, model::process().model);
      if (plan.quant_shm && !ctx->device_hier)  // as above
        model::route_inside_nodes(costed, shape, rank, model::process().model, 4, cfg.shm_cma);
      ASSERT_FALSE(costed.steps.empty()) << what;
      EXPECT_EQ(steps_of(*ran_s), steps_of(costed)) << what << ": the executor ran another schedule than the model costed";
      expect_ran_as_planned(costed, before, what);
      if (n > 4096 && config::quant_pipelined(coll) && cfg.chunk_bytes > 0) {
        EXPECT_GT(plan.quant_chunks, 1) << what << ": HIER_CHUNK did not cut the pipelined quantized schedule";
      }
      ++compared;
    }
  }
  if (asked == 0) GTEST_SKIP() << "HIER_QUANT turns no collective on in this variant";
  if (rank == 0) std::printf("compared %d quantized schedules with what the model costed\n", compared);
}

}  // namespace
}  // namespace hier::exec
