#include "sched/tuning.hpp"

#include <mpi.h>

#include <limits>

namespace hier::sched {
namespace {
constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
constexpr Window kNever{kInf, kInf};
constexpr int64_t KiB = 1024, MiB = 1024 * KiB;
}  // namespace

// Windows where hierarchical (HIER_ALGO=hier) beat the MPI alone on the emulated cluster:
// bench/RESULTS-cluster.md (tools/bench-cluster.sh: 2 nodes x 4 ranks, 1 Gbit/s links, median of
// 2 alternating runs). Bytes as the planner counts them: the whole message (allreduce, bcast),
// the whole input (reduce_scatter), the whole output (allgather: block x ranks; the measured
// crossovers were at 256 KiB (Open MPI) and 64 KiB (MPICH) blocks on 8 ranks). MPICH bcast:
// the re-run after the Allgather fix (bench/RESULTS.md, "MPICH bcast re-measured"). MPICH
// allreduce: unbounded above since pipelining (it lost at 16 MiB unchunked). Where
// hierarchical never won reliably auto stays flat (HIER_ALGO=<coll>=hier still forces it):
// barrier, Open MPI's reduce and alltoall (bench/RESULTS.md, "Reduce, alltoall and barrier on
// the cluster", which also gives MPICH's reduce and alltoall windows; alltoall bytes = what one
// rank sends, 16 MiB = 2 MiB blocks to 8 ranks).
const Thresholds& thresholds() {
#if defined(OMPI_MAJOR_VERSION)
  // Open MPI's Allgatherv is as fast as its Allgather here: never padded.
  constexpr int64_t AGV_PADDED_MIN = kInf;
  // Pipelining (tools/bench-pipeline.sh, bench/RESULTS.md "Chunk pipelining"): 2 MiB chunks
  // made bcast of 16 MiB 2.4-3.5x faster than the MPI against 2.0-2.5x unchunked (three
  // sweeps); allreduce was slower pipelined at 16-32 MiB in both loaded sweeps that tried it
  // (0.68-0.93x against 0.76-1.13x unchunked) and at best level with unchunked on the idle
  // machine (sweep 4): 2 cores leave no idle CPU for overlap to fill.
  constexpr int64_t ALLREDUCE_CHUNK = 0, BCAST_CHUNK = 2 * MiB;
  static const Thresholds t{
      /*allreduce=*/{512 * KiB, kInf}, /*reduce_scatter=*/{64 * KiB, kInf}, /*allgather=*/{2 * MiB, kInf},
      /*bcast=*/{1 * MiB, kInf}, /*reduce=*/kNever, /*barrier=*/kNever, /*alltoall=*/kNever,
      /*allreduce_rs_min=*/64 * KiB, /*bcast_scatter_min=*/256 * KiB, /*reduce_rs_min=*/256 * KiB, /*rs_direct_min=*/256 * KiB,
      /*agv_padded_min=*/AGV_PADDED_MIN, /*allreduce_chunk=*/ALLREDUCE_CHUNK, /*bcast_chunk=*/BCAST_CHUNK};
#else  // MPICH
  // MPICH 4.0.2's Allgatherv over a node's 4 ranks (8 ranks on 2 cores): 64-256 KiB ~70 ms like
  // its Allgather, 1 MiB 430-480 ms, 4 MiB 1.6 s against 0.08-0.12 s for Allgather.
  constexpr int64_t AGV_PADDED_MIN = 512 * KiB;
  // Pipelining: 4 MiB chunks made allreduce of 8-16 MiB 1.30-1.55x faster than the MPI against
  // 0.86-1.32x unchunked (four sweeps, the last on an idle machine; 32 MiB 1.08-1.49x against
  // 1.05-1.38x); 2 MiB chunks were slower than none. Bcast: 4 MiB chunks won in one sweep and
  // lost in two at 8-16 MiB.
  constexpr int64_t ALLREDUCE_CHUNK = 4 * MiB, BCAST_CHUNK = 0;
  static const Thresholds t{
      /*allreduce=*/{64 * KiB, kInf}, /*reduce_scatter=*/{64 * KiB, kInf}, /*allgather=*/{512 * KiB, kInf},
      /*bcast=*/{512 * KiB, 8 * MiB}, /*reduce=*/{2 * MiB, kInf}, /*barrier=*/kNever, /*alltoall=*/{16 * MiB, kInf},
      /*allreduce_rs_min=*/64 * KiB, /*bcast_scatter_min=*/256 * KiB, /*reduce_rs_min=*/256 * KiB, /*rs_direct_min=*/256 * KiB,
      /*agv_padded_min=*/AGV_PADDED_MIN, /*allreduce_chunk=*/ALLREDUCE_CHUNK, /*bcast_chunk=*/BCAST_CHUNK};
#endif
  return t;
}

const Window& Thresholds::window(config::Coll c) const {
  using config::Coll;
  switch (c) {
    case Coll::Allreduce: return allreduce;
    case Coll::ReduceScatterBlock:
    case Coll::ReduceScatter: return reduce_scatter;
    case Coll::Allgather:
    case Coll::Allgatherv: return allgather;
    case Coll::Bcast: return bcast;
    case Coll::Reduce: return reduce;
    case Coll::Barrier: return barrier;
    case Coll::Alltoall: return alltoall;
    case Coll::Count: break;
  }
  return barrier;
}

}  // namespace hier::sched
