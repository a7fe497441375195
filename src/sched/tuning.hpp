// The planner's crossover windows (bytes), measured with tools/bench-cluster.sh on the emulated
// cluster (tools/minicluster, 2 nodes x 4 ranks, 1 Gbit links; see bench/RESULTS-cluster.md). libhier is built
// per MPI family and the two families' flat algorithms differ, so each has its own table.
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace hier::sched {

// The auto planner goes hierarchical for min <= bytes < max.
struct Window {
  int64_t min, max;
  bool contains(int64_t b) const { return b >= min && b < max; }
};

struct Thresholds {
  Window allreduce, reduce_scatter, allgather, bcast, reduce, barrier, alltoall;
  // Within hierarchical: the size from which the bandwidth algorithm replaces the latency one.
  int64_t allreduce_rs_min, bcast_scatter_min, reduce_rs_min;
  // Reduce-scatter steps with at least this many input bytes run by direct exchange
  // (exec/direct.hpp) instead of the MPI's reduce-scatter.
  int64_t rs_direct_min;
  // Allgatherv steps (unequal pieces) with at least this many bytes in all run as an Allgather
  // of padded pieces (exec/direct.hpp) instead of the MPI's Allgatherv.
  int64_t agv_padded_min;
  // Pipeline chunk sizes of hierarchical allreduce and bcast (HIER_CHUNK=auto); 0 = off.
  int64_t allreduce_chunk, bcast_chunk;
  const Window& window(config::Coll c) const;
};

const Thresholds& thresholds();

}  // namespace hier::sched
