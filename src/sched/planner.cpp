#include "sched/planner.hpp"

#include <limits>

#include "sched/pipeline.hpp"
#include "sched/tuning.hpp"

namespace hier::sched {
namespace {

using config::Coll;

// The algorithm for the shape when hierarchical is chosen; Flat where the shape cannot host one.
Algorithm pick(const Query& q, const topo::Shape& s) {
  const Thresholds& t = thresholds();
  switch (q.coll) {
    case Coll::Allreduce:
      return s.cartesian && q.bytes >= t.allreduce_rs_min ? Algorithm::RsArAg : Algorithm::TreeAllreduce;
    case Coll::ReduceScatterBlock:
    case Coll::ReduceScatter:
      return s.cartesian ? Algorithm::RsLevels : Algorithm::Flat;
    case Coll::Allgather:
    case Coll::Allgatherv:
      return s.cartesian ? Algorithm::AgLevels : Algorithm::Flat;
    case Coll::Bcast:
      if (!s.cartesian) return Algorithm::Tree;
      return q.bytes >= t.bcast_scatter_min ? Algorithm::ScatterAllgather : Algorithm::TwoStep;
    case Coll::Reduce:
      if (!s.cartesian) return Algorithm::Tree;
      return q.bytes >= t.reduce_rs_min ? Algorithm::RsReduceGather : Algorithm::TwoStep;
    case Coll::Barrier:
      return Algorithm::Tree;
    case Coll::Alltoall:
      return s.cartesian ? Algorithm::TwoPhase : Algorithm::Flat;
    case Coll::Count:
      break;
  }
  return Algorithm::Flat;
}

}  // namespace

bool worth_building(const Query& q, config::Algo forced) {
  if (forced == config::Algo::Flat) return false;
  if (forced == config::Algo::Hier) return true;
  return thresholds().window(q.coll).contains(q.bytes);
}

Plan plan(const Query& q, const topo::Shape& s, config::Algo forced) {
  if (forced == config::Algo::Flat) return {Algorithm::Flat, "HIER_ALGO=flat"};
  if (!s.hierarchical()) return {Algorithm::Flat, "no hierarchy on this communicator"};
  // Level collectives take int counts; the largest piece is at most the whole message.
  if (q.bytes > std::numeric_limits<int>::max()) return {Algorithm::Flat, "message above 2 GiB"};
  const Algorithm a = pick(q, s);
  if (a == Algorithm::Flat) return {a, "shape not cartesian (uneven ranks per level)"};
  if (forced == config::Algo::Hier) return {a, "HIER_ALGO=hier"};
  // Measured (bench/RESULTS.md): with every rank on one machine the extra steps cost more than
  // the levels save; the hierarchy pays where its outer level crosses a network.
  if (s.one_machine) return {Algorithm::Flat, "all ranks share memory (levels are node:N fakes)"};
  if (!thresholds().window(q.coll).contains(q.bytes)) return {Algorithm::Flat, "outside the measured window"};
  return {a, "inside the measured window"};
}

int chunks_for(config::Coll c, int64_t units, int64_t bytes) {
  if (c != Coll::Allreduce && c != Coll::Bcast) return 1;
  const int64_t want = config::get().chunk_bytes;
  const int64_t table = c == Coll::Allreduce ? thresholds().allreduce_chunk : thresholds().bcast_chunk;
  return chunk_count(units, bytes, want >= 0 ? want : table);
}

}  // namespace hier::sched
