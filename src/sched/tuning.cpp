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
// the re-run after the Allgather fix (bench/RESULTS.md, "MPICH bcast re-measured"). Where
// hierarchical never won reliably (reduce, barrier, alltoall: not measured there) auto stays flat; HIER_ALGO=<coll>=hier still forces them.
const Thresholds& thresholds() {
#if defined(OMPI_MAJOR_VERSION)
  // Open MPI's Allgatherv is as fast as its Allgather here: never padded.
  constexpr int64_t AGV_PADDED_MIN = kInf;
  constexpr int64_t CHUNK = 4 * MiB;
  static const Thresholds t{
      /*allreduce=*/{512 * KiB, kInf}, /*reduce_scatter=*/{64 * KiB, kInf}, /*allgather=*/{2 * MiB, kInf},
      /*bcast=*/{1 * MiB, kInf}, /*reduce=*/kNever, /*barrier=*/kNever, /*alltoall=*/kNever,
      /*allreduce_rs_min=*/64 * KiB, /*bcast_scatter_min=*/256 * KiB, /*reduce_rs_min=*/256 * KiB, /*rs_direct_min=*/256 * KiB,
      /*agv_padded_min=*/AGV_PADDED_MIN, /*chunk_bytes=*/CHUNK};
#else  // MPICH
  // MPICH 4.0.2's Allgatherv over a node's 4 ranks (8 ranks on 2 cores): 64-256 KiB ~70 ms like
  // its Allgather, 1 MiB 430-480 ms, 4 MiB 1.6 s against 0.08-0.12 s for Allgather.
  constexpr int64_t AGV_PADDED_MIN = 512 * KiB;
  constexpr int64_t CHUNK = 4 * MiB;
  static const Thresholds t{
      /*allreduce=*/{64 * KiB, 8 * MiB}, /*reduce_scatter=*/{64 * KiB, kInf}, /*allgather=*/{512 * KiB, kInf},
      /*bcast=*/{512 * KiB, 8 * MiB}, /*reduce=*/kNever, /*barrier=*/kNever, /*alltoall=*/kNever,
      /*allreduce_rs_min=*/64 * KiB, /*bcast_scatter_min=*/256 * KiB, /*reduce_rs_min=*/256 * KiB, /*rs_direct_min=*/256 * KiB,
      /*agv_padded_min=*/AGV_PADDED_MIN, /*chunk_bytes=*/CHUNK};
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
