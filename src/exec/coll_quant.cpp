// Quantized hierarchical allreduce (ZeRO++ qgZ / qwZ idea) on a cartesian 2-level shape of N
// nodes of L ranks, blocks of B values (quant/format.hpp):
//  1. exact reduce-scatter inside the node (PMPI_Reduce_scatter on levels.node), the shards cut
//     at block boundaries: my shard;
//  2. across nodes (levels.cross, rank = node index): the shard quantized once and cut into N
//     block-aligned pieces; piece j goes to cross rank j (PMPI_Alltoallv of the records); the N
//     received copies of my piece are dequantized and summed in one fixed order, node 0..N-1,
//     into a zeroed accumulator of the input type: my reduced piece;
//  3. the reduced piece quantized once, the records allgathered across nodes (PMPI_Allgatherv),
//     and every rank, the owner included, dequantizes all N pieces into its shard of the result;
//  4. exact allgather of the shards inside the node (PMPI_Allgatherv on levels.node).
// Every value of the result comes from the same records through the same kernel on every rank:
// the same bits everywhere. Error per element (docs/collectives.md): at most
// (sum over nodes of the scales of the piece's block)/2 from step 2, plus (scale of the reduced
// block)/2 from step 3, plus float rounding of the sums. A NaN or Inf in a block gives it a NaN
// scale (quant/format.hpp), which the sum and the requantization carry: the whole block of B
// values becomes NaN on every rank (Inf -> NaN, NaN stays NaN), never a number.
//
// Memory: the records, the accumulator and the shard live in the context's scratch, and the
// buffers of the direct level steps in ctx->tmp[0], reserved at the schedule-cache miss and
// agreed on (exec::schedule): nothing large is allocated once the ranks depend on each other
// (the count arrays, L and N ints, are made per call, as the executor's level steps do).
#include "exec/coll_quant.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "diag/log.hpp"
#include "exec/direct.hpp"
#include "exec/executor.hpp"
#include "quant/quant.hpp"

namespace hier::exec {
namespace {

thread_local diag::AlgoTag g_tag = diag::AlgoTag::Hier;

constexpr int64_t kBlock = quant::kDefaultBlock;

int64_t align64(int64_t b) { return (b + 63) / 64 * 64; }

// Block range [first, first + n) cut into `parts` block ranges: part i starts at block
// first + i*n/parts. Returns the start of part i.
int64_t part_start(int64_t n, int parts, int i) { return n * i / parts; }

// The layout of one call on this rank: everything sized from (count, L, N, my position), so the
// same on every call with the same key.
struct Layout {
  int L = 0, N = 0, local = 0, node = 0, bits = 8;
  int64_t elem = 0;                // bytes per value
  int64_t shard_first = 0, shard_n = 0;  // my shard, in values
  int64_t piece_first = 0, piece_n = 0;  // my piece, in values from the shard's start
  // Scratch, byte offsets from its start.
  int64_t off_shard_rec = 0, off_recv_rec = 0, off_acc = 0, off_shard = 0, total = 0;
  // Level steps libhier runs itself where the exact schedule would (exec/executor.cpp's
  // use_direct_rs / use_padded_agv, the same thresholds): direct reduce-scatter inside the node,
  // padded allgathers (MPICH's Allgatherv is pathological for large pieces).
  bool rs_direct = false, agv3_padded = false, agv4_padded = false;

  Layout(const topo::Levels& lv, int64_t count, const TypeInfo& t, int qbits) {
    L = lv.shape.dims[0];
    N = lv.shape.nnodes;
    local = lv.my_local();
    node = lv.my_node();
    bits = qbits;
    elem = t.size;
    const int64_t nb = quant::num_blocks(count, kBlock);
    const int64_t b0 = part_start(nb, L, local), b1 = part_start(nb, L, local + 1);
    shard_first = std::min(b0 * kBlock, count);
    shard_n = std::min(b1 * kBlock, count) - shard_first;
    const int64_t sb = quant::num_blocks(shard_n, kBlock);
    const int64_t p0 = part_start(sb, N, node), p1 = part_start(sb, N, node + 1);
    piece_first = std::min(p0 * kBlock, shard_n);
    piece_n = std::min(p1 * kBlock, shard_n) - piece_first;
    off_shard_rec = 0;
    off_recv_rec = align64(quant::quantized_bytes(shard_n, kBlock, bits));
    off_acc = off_recv_rec + align64(N * quant::quantized_bytes(piece_n, kBlock, bits));
    off_shard = off_acc + align64(piece_n * elem);
    total = off_shard + shard_n * elem;
    rs_direct = use_direct_rs(&t, true, count);
    agv3_padded = use_padded_agv(nullptr, true, quant::quantized_bytes(shard_n, kBlock, bits));
    agv4_padded = use_padded_agv(&t, true, count);
  }
};

// The counts of the level collectives, in values (node) and record bytes (cross).
struct Counts {
  std::vector<int> node_counts, node_displs;  // L: shards
  std::vector<int> cross_counts, cross_displs;  // N: pieces of my shard, as records
  std::vector<int> piece_counts, piece_displs;  // N: my piece from each node, as records
  Counts(const Layout& g, int64_t count)
      : node_counts(g.L), node_displs(g.L), cross_counts(g.N), cross_displs(g.N), piece_counts(g.N), piece_displs(g.N) {
    const int64_t nb = quant::num_blocks(count, kBlock);
    for (int l = 0; l < g.L; ++l) {
      const int64_t f = std::min(part_start(nb, g.L, l) * kBlock, count);
      node_counts[l] = static_cast<int>(std::min(part_start(nb, g.L, l + 1) * kBlock, count) - f);
      node_displs[l] = static_cast<int>(f);
    }
    const int64_t sb = quant::num_blocks(g.shard_n, kBlock);
    for (int j = 0; j < g.N; ++j) {
      const int64_t b0 = part_start(sb, g.N, j), b1 = part_start(sb, g.N, j + 1);
      const int64_t f = std::min(b0 * kBlock, g.shard_n), e = std::min(b1 * kBlock, g.shard_n);
      cross_displs[j] = static_cast<int>(quant::record_offset(b0, kBlock, g.bits));
      cross_counts[j] = static_cast<int>(quant::quantized_bytes(e - f, kBlock, g.bits));
      piece_counts[j] = static_cast<int>(quant::quantized_bytes(g.piece_n, kBlock, g.bits));
      piece_displs[j] = j * piece_counts[j];
    }
  }
};

// Bytes of ctx->tmp the direct steps take (0: none).
int64_t tmp_bytes(const Layout& g, const Counts& c, const TypeInfo& t) {
  int64_t b = 0;
  if (g.rs_direct) b = std::max(b, reduce_scatter_direct_bytes(c.node_counts, g.local, t));
  if (g.agv3_padded) b = std::max(b, allgatherv_padded_bytes(c.cross_counts, nullptr));
  if (g.agv4_padded) b = std::max(b, allgatherv_padded_bytes(c.node_counts, &t));
  return b;
}

template <class T>
int run_quant(const Layout& g, char* mem, const void* sendbuf, char* recv, int64_t count, const TypeInfo& t,
              const topo::Levels& lv, Scratch& tmp) {
  const MPI_Datatype type = t.type;
  const Counts c(g, count);
  char* shard_rec = mem + g.off_shard_rec;
  char* recv_rec = mem + g.off_recv_rec;
  T* acc = reinterpret_cast<T*>(mem + g.off_acc);
  // 1. Exact reduce-scatter inside the node: my shard (in place, MPI puts it at the start of
  //    recv; by direct exchange, in scratch).
  const bool in_place = sendbuf == MPI_IN_PLACE;
  T* shard;
  int err;
  if (g.rs_direct) {
    shard = reinterpret_cast<T*>(mem + g.off_shard);
    err = reduce_scatter_direct(in_place ? recv : static_cast<const char*>(sendbuf), reinterpret_cast<char*>(shard),
                                c.node_counts, t, MPI_SUM, lv.node, tmp);
  } else {
    shard = reinterpret_cast<T*>(in_place ? recv : recv + g.shard_first * g.elem);
    err = PMPI_Reduce_scatter(in_place ? MPI_IN_PLACE : sendbuf, shard, c.node_counts.data(), type, MPI_SUM, lv.node);
  }
  if (err != MPI_SUCCESS) return err;
  // 2. Quantize the shard once (pieces are block-aligned, so piece j's records are one byte
  //    range of the shard's), all-to-all across nodes, sum my piece in node order 0..N-1.
  const int64_t piece_bytes = quant::quantized_bytes(g.piece_n, kBlock, g.bits);
  quant::quantize(shard, g.shard_n, kBlock, g.bits, shard_rec);
  err = PMPI_Alltoallv(shard_rec, c.cross_counts.data(), c.cross_displs.data(), MPI_BYTE, recv_rec, c.piece_counts.data(), c.piece_displs.data(), MPI_BYTE,
                       lv.cross);
  if (err != MPI_SUCCESS) return err;
  std::memset(static_cast<void*>(acc), 0, static_cast<size_t>(g.piece_n * g.elem));
  for (int j = 0; j < g.N; ++j) quant::dequantize_add(recv_rec + j * piece_bytes, g.piece_n, kBlock, g.bits, acc);
  // 3. Requantize my reduced piece once, straight into its place among the shard's records, and
  //    allgather the records across nodes; everyone, the owner included, dequantizes the whole
  //    shard from the same records.
  quant::quantize(acc, g.piece_n, kBlock, g.bits, shard_rec + c.cross_displs[g.node]);
  err = g.agv3_padded ? allgatherv_padded(nullptr, true, shard_rec, c.cross_counts, c.cross_displs, nullptr, lv.cross, tmp)
                      : PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, shard_rec, c.cross_counts.data(),
                                        c.cross_displs.data(), MPI_BYTE, lv.cross);
  if (err != MPI_SUCCESS) return err;
  quant::dequantize(shard_rec, g.shard_n, kBlock, g.bits, reinterpret_cast<T*>(recv + g.shard_first * g.elem));
  // 4. Exact allgather of the shards inside the node.
  return g.agv4_padded ? allgatherv_padded(nullptr, true, recv, c.node_counts, c.node_displs, &t, lv.node, tmp)
                       : PMPI_Allgatherv(MPI_IN_PLACE, 0, type, recv, c.node_counts.data(), c.node_displs.data(), type,
                                         lv.node);
}

}  // namespace

diag::AlgoTag take_algo_tag() {
  const diag::AlgoTag t = g_tag;
  g_tag = diag::AlgoTag::Hier;
  return t;
}

std::optional<int> quant_allreduce(Prepared& p, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                                   MPI_Op op, const TypeInfo& t) {
  const config::Quant mode = config::get().quant_for(config::Coll::Allreduce);
  if (mode == config::Quant::Off || op != MPI_SUM || (type != MPI_FLOAT && type != MPI_DOUBLE) || !t.dense)
    return std::nullopt;
  if (count <= 0 || int64_t{count} * t.size < kQuantMinBytes) return std::nullopt;
  const topo::Levels& lv = *p.ctx->levels;
  if (!lv.shape.cartesian || lv.shape.nlevels() != 2 || lv.node == MPI_COMM_NULL || lv.cross == MPI_COMM_NULL)
    return std::nullopt;
  const int bits = mode == config::Quant::Int8 ? 8 : 4;
  const Layout g(lv, count, t, bits);
  // Byte counts of the level collectives are ints: the whole records of the call must fit.
  if (quant::quantized_bytes(count, kBlock, bits) > INT_MAX / 2) return std::nullopt;
  sched::Key key{static_cast<uint8_t>(config::Coll::Allreduce), p.plan.algo, sendbuf == MPI_IN_PLACE, false, -1,
                 count, {}, 1};
  key.extent = t.extent;
  key.true_extent = t.true_extent;
  key.true_lb = t.true_lb;
  key.quant = static_cast<uint8_t>(bits);
  key.quant_block = static_cast<int32_t>(kBlock);
  auto s = schedule(p, key, [&](int) {
    sched::Schedule q;
    q.name = bits == 8 ? "allreduce/quant-int8" : "allreduce/quant-int4";
    return q;
  }, [&](const sched::Schedule&) {
    const int64_t tb = tmp_bytes(g, Counts(g, count), t);
    return p.ctx->scratch.get(static_cast<size_t>(g.total)) != nullptr &&
           (tb == 0 || p.ctx->tmp[0].get(static_cast<size_t>(tb)) != nullptr);
  });
  if (!s) return std::nullopt;
  char* mem = p.ctx->scratch.get(static_cast<size_t>(g.total));  // reserved above: allocates nothing
  if (!mem) return MPI_ERR_NO_MEM;
  HIER_TRACE("exec", "rank %d: MPI_Allreduce of %d %s quantized %s, block %lld, %d pieces across %d nodes of %d",
             lv.rank, count, type == MPI_FLOAT ? "float" : "double", bits == 8 ? "int8" : "int4",
             static_cast<long long>(kBlock), g.N, g.N, g.L);
  g_tag = bits == 8 ? diag::AlgoTag::HierInt8 : diag::AlgoTag::HierInt4;
  char* recv = static_cast<char*>(recvbuf);
  return type == MPI_FLOAT ? run_quant<float>(g, mem, sendbuf, recv, count, t, lv, p.ctx->tmp[0])
                           : run_quant<double>(g, mem, sendbuf, recv, count, t, lv, p.ctx->tmp[0]);
}

}  // namespace hier::exec
