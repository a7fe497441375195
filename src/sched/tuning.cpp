#include "sched/tuning.hpp"

#include <mpi.h>

#include <limits>

namespace hier::sched {
namespace {
constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
constexpr Window kNever{kInf, kInf};
constexpr int64_t KiB = 1024, MiB = 1024 * KiB;
}  // namespace

// Windows where hierarchical beat flat in bench/RESULTS.md (minicluster, both MPIs). Where it
// never did reliably (bcast, and collectives not measured yet: reduce, barrier, alltoall), auto
// stays flat; HIER_ALGO=<coll>=hier still forces them.
const Thresholds& thresholds() {
#if defined(OMPI_MAJOR_VERSION)
  static const Thresholds t{
      /*allreduce=*/kNever, /*reduce_scatter=*/kNever, /*allgather=*/{1 * MiB, kInf},
      /*bcast=*/kNever, /*reduce=*/kNever, /*barrier=*/kNever, /*alltoall=*/kNever,
      /*allreduce_rs_min=*/64 * KiB, /*bcast_scatter_min=*/256 * KiB, /*reduce_rs_min=*/256 * KiB, /*rs_direct_min=*/256 * KiB};
#else  // MPICH
  static const Thresholds t{
      /*allreduce=*/{64 * KiB, 8 * MiB}, /*reduce_scatter=*/{1 * MiB, kInf}, /*allgather=*/{256 * KiB, 8 * MiB},
      /*bcast=*/kNever, /*reduce=*/kNever, /*barrier=*/kNever, /*alltoall=*/kNever,
      /*allreduce_rs_min=*/64 * KiB, /*bcast_scatter_min=*/256 * KiB, /*reduce_rs_min=*/256 * KiB, /*rs_direct_min=*/256 * KiB};
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
