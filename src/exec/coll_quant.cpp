// Quantized hierarchical collectives (ZeRO++ qgZ / qwZ idea; docs/quantization.md): the entry
// points of MPI_Allreduce, MPI_Reduce_scatter(_block) and MPI_Allgather under HIER_QUANT, in
// their blocking, nonblocking (MPI_I...) and persistent (MPI_..._init) forms. Each entry point
// decides the call (from the type signature and what every rank shares), builds its schedule key
// and schedule (sched/build_quant.cpp: Quantize, Alltoallv of records, DequantizeReduce in one
// fixed node order, Dequantize, ...; run by the executor like every other schedule and printed by
// HIER_DEBUG=TRACE at the schedule-cache miss) and hands a QuantCall to exec/quant_call.cpp, which
// runs it blocking or as a request. The state kept across calls lives in quant/: error feedback
// (quant/feedback.hpp: the call site's residual, bound to the run; requests outstanding on one
// site share it, one quantize step at a time) and the report's "quantization" section
// (quant/stats.hpp: statistics and the check's errors).
// Error per element (docs/quantization.md): allreduce at most (sum over nodes of the scales of
// the piece's block)/2 plus (scale of the reduced block)/2 plus float rounding of the sums;
// reduce-scatter the first term; allgather (scale of the block)/2. A NaN or Inf in a block
// gives it a NaN scale (quant/format.hpp): the whole block becomes NaN on every rank.
#include "exec/coll_quant.hpp"

#include <numeric>
#include <vector>

#include "diag/log.hpp"
#include "dtype/signature.hpp"
#include "exec/quant_call.hpp"
#include "exec/request.hpp"
#include "quant/quant.hpp"
#include "sched/build.hpp"

namespace hier::exec {
namespace {

using config::Coll;

sched::Key quant_key(Coll c, const Prepared& p, bool in_place, int64_t n, const TypeInfo& t, int bits) {
  sched::Key key{static_cast<uint8_t>(c), p.plan.algo, in_place, false, -1, n, {}, p.plan.quant_chunks};
  key.extent = t.extent;
  key.true_extent = t.true_extent;
  key.true_lb = t.true_lb;
  key.quant = static_cast<uint8_t>(bits);
  key.quant_block = static_cast<int32_t>(kb());
  return key;
}

// The builders' parameters: the bits, HIER_QUANT_BLOCK and the plan's choices of level steps
// (direct reduce-scatter, padded allgathers), the same on every rank.
sched::QuantParams params(const Prepared& p, int bits, bool block_variant) {
  sched::QuantParams q;
  q.bits = bits;
  q.block = kb();
  q.direct_rs_from = p.plan.direct_rs_from;
  q.padded_agv_from = p.plan.padded_agv_from;
  q.block_variant = block_variant;
  q.chunks = p.plan.quant_chunks;  // pipelined (the allgather: never; Plan::quant_chunks)
  return q;
}

// Whether a reduction's datatype may run quantized: the predefined MPI_FLOAT / MPI_DOUBLE (the
// handle), and MPIX_C_FLOAT16 where the MPI itself reduces it with MPI_SUM (HIER_MPI_REDUCES_F16,
// probed at configure time: MPICH 4.0.2 aborts in every reduction of it, so there the call is
// passed on exactly and fails as with the MPI alone; a quantized call must not succeed where the
// exact one cannot, nor its intra-node exact reduce-scatter run into that abort). The standard
// asks for the same datatype on every rank of a reduction, and both MPIs reject MPI_SUM on a
// derived datatype, a duplicate of MPI_FLOAT included (MPI_ERR_OP: Open MPI 4.1, MPICH 4.0), so
// no correct program passes MPI_FLOAT on one rank and an equivalent derived type on another, and
// such a call still fails as with the MPI alone.
bool reduction_type(MPI_Datatype type) {
  return type == MPI_FLOAT || type == MPI_DOUBLE || (HIER_MPI_REDUCES_F16 && quant_f16(type));
}

// The element type's name in the trace.
const char* elem_name(MPI_Datatype t) { return t == MPI_FLOAT ? "float" : t == MPI_DOUBLE ? "double" : "float16"; }

// The bits the plan chose (plan.quant_bits, 0: exact): the planner saw the op and the values
// (model::Call::quantizable), the configuration, the shape and the floor. The level
// communicators are a guard, not a second decision: a cartesian 2-level shape has them.
int planned_bits(const model::Plan& plan, const topo::Levels& lv) {
  if (lv.node == MPI_COMM_NULL || lv.cross == MPI_COMM_NULL) return 0;
  return plan.quant_bits;
}

// The form of the call, for TRACE.
const char* form(const MPI_Request* req) {
  return !req ? "" : persistent_init_scope() ? " (persistent)" : " (nonblocking)";
}

}  // namespace

bool quant_f16(MPI_Datatype t) {
#if defined(MPIX_C_FLOAT16) && HIER_QUANT_F16
  return t == MPIX_C_FLOAT16;
#else
  (void)t;
  return false;
#endif
}

bool quant_elem(MPI_Datatype t) { return t == MPI_FLOAT || t == MPI_DOUBLE || quant_f16(t); }

int64_t quant_elem_size(MPI_Datatype t) { return t == MPI_FLOAT ? 4 : t == MPI_DOUBLE ? 8 : quant_f16(t) ? 2 : 1; }

bool quantizable_reduction(MPI_Datatype type, MPI_Op op) { return op == MPI_SUM && reduction_type(type); }

std::optional<Ran> quant_allreduce(Prepared& p, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                                   MPI_Op op, const TypeInfo& t, MPI_Request* req) {
  if (count <= 0) return std::nullopt;
  const topo::Levels& lv = *p.ctx->levels;
  const int bits = planned_bits(p.plan, lv);
  if (!bits) return std::nullopt;
  // (The byte counts of the level collectives fit their ints: the planner quantizes no call
  // whose records would not, model::quant_too_large.)
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const int64_t nbytes = int64_t{count} * t.size;
  const sched::QuantParams qp = params(p, bits, false);
  const int rank = lv.rank;
  // The check's memory: the exact result, a copy of the input (in place, or device memory) and
  // of the result (device memory).
  const int64_t check_bytes = check_bytes_if(3 * nbytes);
  const auto s = quant_schedule(p, quant_key(Coll::Allreduce, p, in_place, count, t, bits), t, check_bytes,
                                [&](int) { return sched::build_quant_allreduce(lv.shape, rank, count, in_place, qp); });
  if (!s) return std::nullopt;
  if (s->chunks > 1) note_pipelined(Coll::Allreduce, s->chunks);  // the report's "pipeline" section
  HIER_TRACE("exec", "rank %d: MPI_Allreduce%s of %d %s quantized %s, block %lld, across %d nodes of %d", lv.rank,
             form(req), count, elem_name(type), bits == 8 ? "int8" : "int4",
             static_cast<long long>(kb()), lv.shape.nnodes, lv.shape.dims[0]);
  auto q = new_call(Coll::Allreduce, bits, p, s, t, in_place ? recvbuf : sendbuf, count, check_bytes);
  q->send = static_cast<const char*>(sendbuf);
  q->recv = static_cast<char*>(recvbuf);
  // Values crossing nodes exactly: my shard but my piece once, my reduced piece to N - 1 nodes
  // (summed over the chunks of a pipelined schedule: each quantizes its shard and its piece).
  const int64_t piece_n = sched::count_of(*s, sched::Kind::DequantizeReduce);
  const int64_t shard_n = sched::count_of(*s, sched::Kind::Quantize) - piece_n;
  q->exact_bytes = ((shard_n - piece_n) + piece_n * (lv.shape.nnodes - 1)) * t.size;
  // The check: the exact result, through the MPI, of the input (a copy of it in place).
  q->in = in_place ? q->recv : q->send;
  q->copy_in = in_place;
  q->in_off = nbytes;
  q->in_bytes = nbytes;
  q->out_n = count;
  q->got_off = 2 * nbytes;
  return run_or_start(std::move(q), req);
}

std::optional<Ran> quant_reduce_scatter(Prepared& p, Coll coll, const void* sendbuf, void* recvbuf,
                                        const std::vector<int64_t>& counts, MPI_Op op, const TypeInfo& t,
                                        MPI_Request* req) {
  const topo::Levels& lv = *p.ctx->levels;
  if (static_cast<int>(counts.size()) != lv.size) return std::nullopt;
  const MPI_Datatype elem = t.type;
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (total <= 0) return std::nullopt;
  const int bits = planned_bits(p.plan, lv);
  if (!bits) return std::nullopt;
  // (Every byte count of the level collectives is an int: the planner bounds the records of
  // any counts of this size, model::quant_too_large.)
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const bool block = coll == Coll::ReduceScatterBlock;
  sched::Key key = quant_key(coll, p, in_place, block ? counts[0] : total, t, bits);
  if (!block) key.counts = counts;
  const int64_t nbytes = total * t.size;
  const sched::QuantParams qp = params(p, bits, block);
  const int rank = lv.rank;
  // The check's memory: the exact result (my piece), a copy of the input (in place, or device
  // memory) and of my piece of the result (device memory).
  const int64_t check_bytes = check_bytes_if(2 * nbytes + counts[rank] * t.size);
  const auto s = quant_schedule(p, key, t, check_bytes, [&](int) {
    return sched::build_quant_reduce_scatter(lv.shape, rank, counts, in_place, qp);
  });
  if (!s) return std::nullopt;
  const char* name = block ? "reduce_scatter_block" : "reduce_scatter";
  HIER_TRACE("exec", "rank %d: %s%s of %lld %s quantized %s, block %lld, across %d nodes of %d", lv.rank,
             name, form(req), static_cast<long long>(total), elem_name(elem),
             bits == 8 ? "int8" : "int4", static_cast<long long>(kb()), lv.shape.nnodes, lv.shape.dims[0]);
  const char* in = static_cast<const char*>(in_place ? recvbuf : sendbuf);
  auto q = new_call(coll, bits, p, s, t, in, total, check_bytes);
  q->send = static_cast<const char*>(sendbuf);
  q->recv = static_cast<char*>(recvbuf);
  // Values crossing nodes exactly: my node's partial sums of the other nodes' pieces.
  q->exact_bytes = (s->residual - counts[rank]) * t.size;
  q->in = in;
  q->copy_in = in_place;
  q->in_off = nbytes;
  q->in_bytes = nbytes;
  q->out_n = counts[rank];
  q->got_off = 2 * nbytes;
  q->icounts.assign(counts.begin(), counts.end());
  return run_or_start(std::move(q), req);
}

std::optional<Ran> quant_allgather(Prepared& p, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                   void* recvbuf, int recvcount, const TypeInfo& rt, MPI_Request* req) {
  const topo::Levels& lv = *p.ctx->levels;
  if (recvcount <= 0) return std::nullopt;
  // Ranks may pass receive types of the same signature in different layouts (MPI_FLOAT x 2n here,
  // a contiguous type of 2 floats x n or a strided one there): everything below that ranks must
  // agree on (the decision, the key, the communication steps) reads the signature only, c values
  // of its element type per rank; a rank whose own layout is not dense packs (LoadBlock) and
  // unpacks (StoreBlock) its part through the datatype engine.
  // The plan quantizes only float, double and float16 signatures (model::Call::quantizable:
  // quant_elem) whose records fit the level collectives' ints (model::quant_too_large).
  const int bits = planned_bits(p.plan, lv);
  if (!bits) return std::nullopt;
  const MPI_Datatype elem = dtype::signature_elem(rt.type);
  const TypeInfo et = type_info(elem);
  const int64_t c = int64_t{recvcount} * rt.size / et.size;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const int64_t mybytes = c * et.size, allbytes = mybytes * lv.size;
  char* recv = static_cast<char*>(recvbuf);
  const int64_t block_stride = int64_t{recvcount} * rt.extent;  // recvbuf's blocks, in this rank's layout
  const TypeInfo st = in_place ? rt : type_info(sendtype);
  const int64_t scount = in_place ? recvcount : sendcount;
  if (!st.ok || scount * st.size != mybytes) return std::nullopt;  // PMPI reports the mismatch
  const sched::QuantParams qp = params(p, bits, false);
  const int rank = lv.rank;
  // Two forms on this rank (its receive layout, not in the key, picks one): both built and
  // reserved at the miss. The check's memory: the exact result, my input, and the result as
  // dense values (a non-dense receive layout's, packed; a device binding's, copied).
  const int64_t check_bytes = check_bytes_if(2 * allbytes + mybytes);
  const auto s = quant_schedule(
      p, quant_key(Coll::Allgather, p, false, c, et, bits), et, check_bytes,
      [&](int v) { return sched::build_quant_allgather(lv.shape, rank, c, v == 1, qp); }, rt.dense ? 0 : 1, true);
  if (!s) return std::nullopt;
  HIER_TRACE("exec", "rank %d: MPI_Allgather%s of %lld %s per rank quantized %s, block %lld, across %d nodes of %d",
             lv.rank, form(req), static_cast<long long>(c), elem_name(elem),
             bits == 8 ? "int8" : "int4", static_cast<long long>(kb()), lv.shape.nnodes, lv.shape.dims[0]);
  const char* src = in_place ? recv + lv.rank * block_stride : static_cast<const char*>(sendbuf);
  auto q = new_call(Coll::Allgather, bits, p, s, et, src, recvcount, check_bytes);
  q->recv = recv;  // the schedule reads my block through the blocks (LoadBlock), never `send`
  q->exact_bytes = mybytes * (lv.shape.nnodes - 1);
  q->st = st;
  q->rt = rt;
  q->src = src;
  q->scount = scount;
  q->rcount = recvcount;
  q->block_stride = block_stride;
  q->in = nullptr;  // my block, loaded (packed) through the blocks
  q->in_off = allbytes;
  q->in_bytes = mybytes;
  q->out_n = c * lv.size;
  q->dense_off = rt.dense ? 0 : allbytes + mybytes;
  q->got_off = allbytes + mybytes;  // (device bindings are dense: the dense result's place)
  return run_or_start(std::move(q), req);
}

}  // namespace hier::exec

