// Quantized hierarchical MPI_Allreduce (issue 13, HIER_QUANT=int8|int4): MPI_SUM on dense
// MPI_FLOAT / MPI_DOUBLE, cartesian 2-level shapes, messages of at least kQuantMinBytes.
// Lossy, within a stated bound (docs/collectives.md, "Quantized allreduce"); every rank still
// gets the same bits. Everything else stays exact.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>

#include "diag/stats.hpp"
#include "exec/prepare.hpp"

namespace hier::exec {

// Below this many bytes an allreduce stays exact even under HIER_QUANT: the cross-node volume
// saved is small next to the extra steps (quantize, an all-to-all and an allgather instead of
// one allreduce of the shard) and the fixed per-call latency dominates. Not tuned yet.
inline constexpr int64_t kQuantMinBytes = 64 * 1024;

// The quantized path of exec::allreduce, given the call's prepared context. Null when the call
// is not eligible (the decision uses only the arguments, the configuration and the shape, so it
// is the same on every rank), or when the schedule's memory could not be acquired on every rank:
// the caller then goes on with the exact path. Otherwise the MPI return code.
std::optional<int> quant_allreduce(Prepared& p, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                                   MPI_Op op, const TypeInfo& t);

// The tag of the last hierarchical call made on this thread (HierInt8 / HierInt4 after a
// quantized allreduce, Hier otherwise), reset to Hier: the coll dispatch reports it.
diag::AlgoTag take_algo_tag();

}  // namespace hier::exec
