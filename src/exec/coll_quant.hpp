// Quantized hierarchical collectives (issue 13, HIER_QUANT=int8|int4, docs/quantization.md):
// MPI_Allreduce and MPI_Reduce_scatter(_block) with MPI_SUM on MPI_FLOAT / MPI_DOUBLE, and
// MPI_Allgather of float / double type signatures (any handle or layout) on cartesian 2-level shapes, where the planner predicts them faster.
// Blocking, nonblocking (MPI_Iallreduce, ...) and persistent (MPI_Allreduce_init, ...) forms
// alike: one decision and one schedule-cache entry, run blocking or as a request (exec/request.hpp).
// Lossy, within a stated bound; every rank still gets the same bits. Everything else stays
// exact. The call's run: exec/quant_call.hpp (the check, HIER_QUANT_CHECK, included); the state
// kept across calls: quant/feedback.hpp (HIER_QUANT_FEEDBACK) and quant/stats.hpp (the report's
// "quantization" section).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "exec/entry.hpp"
#include "exec/prepare.hpp"

namespace hier::exec {

// What the planner is told about a call (model::Call::quantizable), so that its decision,
// plan.quant_bits, is the one decision (model/cost_quant.hpp weighs the quantized schedule
// against its best exact plan, with the configuration, the shape and the floor): whether the op
// and the values allow a quantized schedule. From what every rank shares only: a reduction's op
// and datatype (MPI_SUM on a reduction type: reduction_type in coll_quant.cpp), an allgather's
// element type of its type signature (quant_elem of dtype::signature_elem, whatever the handle
// or layout a rank passes).
bool quantizable_reduction(MPI_Datatype type, MPI_Op op);

// The element types the kernels quantize (quant/quant.hpp): MPI_FLOAT, MPI_DOUBLE, and
// MPIX_C_FLOAT16 where the MPI defines it and the compiler has a 16-bit float (quant_f16; Open
// MPI 4.1 has no such type). Reductions take MPIX_C_FLOAT16 only where the MPI reduces it too
// (HIER_MPI_REDUCES_F16). quant_elem_size: bytes per value (4, 8, 2), 1 for any other type.
bool quant_f16(MPI_Datatype t);
bool quant_elem(MPI_Datatype t);
int64_t quant_elem_size(MPI_Datatype t);

// The quantized path of exec::allreduce, given the call's prepared context. Null when the call
// is not eligible (the decision uses only the arguments, the configuration and the shape, so it
// is the same on every rank), or when the schedule's memory could not be acquired on every rank:
// the caller then goes on with the exact path. Otherwise the MPI return code. `req`: null for
// the blocking call; otherwise the call is MPI_Iallreduce (or, inside a PersistentInit scope,
// MPI_Allreduce_init) and *req receives its request, which completes with the same bits the
// blocking call gives on the same input.
std::optional<Ran> quant_allreduce(Prepared& p, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                                   MPI_Op op, const TypeInfo& t, MPI_Request* req = nullptr);

// The quantized paths of reduce_scatter_block / reduce_scatter (`counts` per rank, `coll` says
// which) and of allgather (recvtype's TypeInfo `rt`; the send type, and the other ranks' types,
// may differ from it in layout: a non-dense layout is packed and unpacked through the datatype
// engine). Same contract as quant_allreduce, `req` included.
std::optional<Ran> quant_reduce_scatter(Prepared& p, config::Coll coll, const void* sendbuf, void* recvbuf,
                                        const std::vector<int64_t>& counts, MPI_Op op, const TypeInfo& t,
                                        MPI_Request* req = nullptr);
std::optional<Ran> quant_allgather(Prepared& p, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                   void* recvbuf, int recvcount, const TypeInfo& rt, MPI_Request* req = nullptr);


}  // namespace hier::exec
