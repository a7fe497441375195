// Quantized schedules (HIER_QUANT, docs/quantization.md; the ZeRO++ qgZ / qwZ idea) on a
// cartesian 2-level shape of N nodes of L ranks (node communicator rank = local index l, cross
// communicator rank = node index m), blocks of B values (quant/format.hpp). Units: values of the
// call's float / double element type for Send / Recv / Scratch, bytes for Records.
//
// Allreduce:
//  1. exact reduce-scatter inside the node, the shards cut at block boundaries: my shard;
//  2. the shard quantized once and cut into N block-aligned pieces; piece j goes to cross rank j
//     (alltoallv of the records); the N received copies of my piece are dequantized and summed
//     in one fixed order, node 0..N-1, into a zeroed accumulator: my reduced piece;
//  3. the reduced piece quantized once, straight into its place among the shard's records, and the
//     records allgathered across nodes;
//  4. the shards' records allgathered inside the node (4x (int8) to 8x (int4) fewer bytes than
//     the values: this node step and the reduce-scatter are the call's largest), and every rank,
//     the owner included, dequantizes every shard into its place in the result.
// Every value of the result comes from the same records through the same kernel on every rank:
// the same bits everywhere.
// Reduce_scatter(_block) (qgZ): the input permuted so that local index l's pieces (those of
// ranks (m, l), m = 0..N-1) are contiguous, an exact reduce-scatter inside the node, each of the
// N pieces quantized once (from its own first value), an all-to-all across nodes, and the N
// copies of my piece summed in node order 0..N-1 straight into the receive buffer.
// Allgather (qwZ): my block (LoadBlock: packed from the user's layout) quantized once, its records allgathered across nodes, then the
// node's bundles allgathered inside the node (the records move unchanged), and every rank, the
// source included, dequantizes all P records.
// Pipelining (QuantParams::chunks > 1, sched/pipeline.hpp): the allreduce's vector, and each
// rank's output of a reduce-scatter whose counts are all equal, cut into chunks at block
// boundaries; chunk k is the schedule above for the chunk alone (the reduce-scatter's chunk k:
// piece k of every rank's block, read from the whole call's input at rank r's block + the piece's
// offset), its steps interleaved into waves with the other chunks'. The blocks are the unchunked
// schedule's, but the shards and pieces (which rank quantizes which block) follow the chunks, so
// the result may differ from the unchunked one in the last bits, within the same bound; every
// rank still gets the same bits.
#include <algorithm>

#include "quant/format.hpp"
#include "sched/build.hpp"
#include "sched/pipeline.hpp"

namespace hier::sched {
namespace {

int64_t align64(int64_t b) { return (b + 63) / 64 * 64; }

// Block range [0, n) cut into `parts` block ranges: part i starts at block n*i/parts.
int64_t part_start(int64_t n, int parts, int i) { return n * i / parts; }

// Rank at (node m, local l).
std::vector<int> grid(const topo::Shape& s) {
  const int L = s.dims[0];
  std::vector<int> g(static_cast<size_t>(s.size));
  for (int r = 0; r < s.size; ++r) g[static_cast<size_t>(s.node_of[r] * L + s.local_of[r])] = r;
  return g;
}

Schedule base(const char* name, const QuantParams& q) {
  Schedule out;
  out.name = std::string(name) + (q.bits == 8 ? "/quant-int8" : "/quant-int4");
  out.unit = Unit::Elements;
  out.quant_bits = q.bits;
  out.quant_block = q.block;
  out.direct_rs_from = q.direct_rs_from;
  out.padded_agv_from = q.padded_agv_from;
  return out;
}

Step local(Kind k, Ref src, Ref dst, int64_t count) {
  Step st;
  st.kind = k;
  st.src = src;
  st.dst = dst;
  st.count = count;
  return st;
}

// The all-to-all of records across nodes: records [0, ...) at displs, into records [at, ...).
Step records_alltoallv(const std::vector<int64_t>& counts, const std::vector<int64_t>& displs,
                       const std::vector<int64_t>& rcounts, const std::vector<int64_t>& rdispls, int64_t at) {
  Step st;
  st.kind = Kind::Alltoallv;
  st.comm = {On::Cross};
  st.bytes = true;
  st.src = {Buf::Records, 0};
  st.dst = {Buf::Records, at};
  st.counts = counts;
  st.displs = displs;
  st.rcounts = rcounts;
  st.rdispls = rdispls;
  return st;
}

Schedule quant_allreduce_one(const topo::Shape& s, int rank, int64_t n, bool in_place, const QuantParams& q) {
  Schedule out = base("allreduce", q);
  const int64_t B = q.block;
  const int L = s.dims[0], N = s.nnodes, local_ = s.local_of[rank], node = s.node_of[rank];
  const int64_t nb = quant::num_blocks(n, B);
  // The shards of the node, block-aligned: local index l reduces [first_l, first_l + n_l).
  std::vector<int64_t> node_counts(L), node_displs(L);
  for (int l = 0; l < L; ++l) {
    const int64_t f = std::min(part_start(nb, L, l) * B, n);
    node_counts[l] = std::min(part_start(nb, L, l + 1) * B, n) - f;
    node_displs[l] = f;
  }
  const int64_t shard_n = node_counts[local_];
  // The pieces of my shard, block-aligned: piece j goes to node j (record bytes).
  const int64_t sb = quant::num_blocks(shard_n, B);
  std::vector<int64_t> cross_counts(N), cross_displs(N), piece_counts(N), piece_displs(N);
  int64_t piece_n = 0;
  for (int j = 0; j < N; ++j) {
    const int64_t b0 = part_start(sb, N, j), b1 = part_start(sb, N, j + 1);
    const int64_t f = std::min(b0 * B, shard_n), e = std::min(b1 * B, shard_n);
    cross_displs[j] = quant::record_offset(b0, B, q.bits);
    cross_counts[j] = quant::quantized_bytes(e - f, B, q.bits);
    if (j == node) piece_n = e - f;
  }
  const int64_t piece_bytes = quant::quantized_bytes(piece_n, B, q.bits);
  for (int j = 0; j < N; ++j) {
    piece_counts[j] = piece_bytes;
    piece_displs[j] = j * piece_bytes;
  }
  // Records (bytes): the node's shards' [0, rec_recv), shard l's at node_rec_displs[l] (mine
  // among them, so that the node allgather runs in place), the N copies of my piece [rec_recv, ...).
  std::vector<int64_t> node_rec_counts(L), node_rec_displs(L);
  int64_t rec_recv = 0;
  for (int l = 0; l < L; ++l) {
    node_rec_displs[l] = rec_recv;
    node_rec_counts[l] = quant::quantized_bytes(node_counts[l], B, q.bits);
    rec_recv += align64(node_rec_counts[l]);
  }
  const int64_t mine = node_rec_displs[local_];
  for (int64_t& d : cross_displs) d += mine;
  // Scratch (values): the shard [0, shard_n), the accumulator [shard_n, + piece_n).
  out.scratch = shard_n + piece_n;
  out.records = rec_recv + N * piece_bytes;
  out.residual = shard_n + piece_n;
  const Ref shard{Buf::Scratch, 0}, acc{Buf::Scratch, shard_n};

  Step rs;  // 1.
  rs.kind = Kind::ReduceScatter;
  rs.comm = {On::Node};
  rs.src = in_place ? Ref{Buf::Recv, 0} : Ref{Buf::Send, 0};
  rs.dst = shard;
  rs.counts = node_counts;
  out.steps.push_back(rs);

  Step qs = local(Kind::Quantize, shard, {Buf::Records, mine}, shard_n);  // 2.
  qs.residual = 0;
  out.steps.push_back(qs);
  out.steps.push_back(records_alltoallv(cross_counts, cross_displs, piece_counts, piece_displs, rec_recv));
  Step dr = local(Kind::DequantizeReduce, {Buf::Records, rec_recv}, acc, piece_n);
  dr.parts = N;
  dr.part_bytes = piece_bytes;
  out.steps.push_back(dr);

  Step qp = local(Kind::Quantize, acc, {Buf::Records, cross_displs[node]}, piece_n);  // 3.
  qp.residual = shard_n;
  out.steps.push_back(qp);
  Step ag;
  ag.kind = Kind::Allgatherv;
  ag.comm = {On::Cross};
  ag.bytes = true;
  ag.in_place = true;
  ag.dst = {Buf::Records, 0};
  ag.counts = cross_counts;
  ag.displs = cross_displs;
  out.steps.push_back(ag);

  Step ag4 = ag;  // 4.
  ag4.comm = {On::Node};
  ag4.counts = node_rec_counts;
  ag4.displs = node_rec_displs;
  out.steps.push_back(ag4);
  for (int l = 0; l < L; ++l)
    out.steps.push_back(local(Kind::Dequantize, {Buf::Records, node_rec_displs[l]}, {Buf::Recv, node_displs[l]}, node_counts[l]));
  return out;
}

// in_displs[r]: where rank r's block of the input starts (the whole call's, for a chunk).
Schedule quant_reduce_scatter_one(const topo::Shape& s, int rank, const std::vector<int64_t>& counts,
                                  const std::vector<int64_t>& in_displs, bool in_place, const QuantParams& q) {
  Schedule out = base(q.block_variant ? "reduce_scatter_block" : "reduce_scatter", q);
  const int64_t B = q.block;
  const int L = s.dims[0], N = s.nnodes, local_ = s.local_of[rank];
  const std::vector<int> at = grid(s);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  std::vector<int64_t> node_counts(L, 0);
  for (int l = 0; l < L; ++l)
    for (int m = 0; m < N; ++m) node_counts[l] += counts[at[m * L + l]];
  const int64_t my_count = counts[rank], mine_n = node_counts[local_];
  std::vector<int64_t> cross_counts(N), cross_displs(N), recv_counts(N), recv_displs(N);
  int64_t off = 0;
  for (int m = 0; m < N; ++m) {
    cross_displs[m] = off;
    cross_counts[m] = quant::quantized_bytes(counts[at[m * L + local_]], B, q.bits);
    off += cross_counts[m];
    recv_counts[m] = quant::quantized_bytes(my_count, B, q.bits);
    recv_displs[m] = m * recv_counts[m];
  }
  // Scratch (values): the permuted input [0, total), my N pieces [total, + mine_n).
  // Records (bytes): my pieces' [0, off), the N copies of my piece [rec_recv, ...).
  const int64_t rec_recv = align64(off);
  out.scratch = total + mine_n;
  out.records = rec_recv + N * quant::quantized_bytes(my_count, B, q.bits);
  out.residual = mine_n;

  // Stages (Step::stage, for pipelining): the same numbers on every rank, also where a rank
  // skips an empty piece: copies 0 .. L*N-1, the reduce-scatter L*N, quantizations from L*N+1.
  auto staged = [&](Step st, int stage) {
    st.stage = stage;
    out.steps.push_back(std::move(st));
  };
  // 0. Permute: local index l's pieces, those of ranks (0, l), (1, l), ..., back to back.
  const Buf in = in_place ? Buf::Recv : Buf::Send;
  int64_t o = 0;
  for (int l = 0; l < L; ++l)
    for (int m = 0; m < N; ++m) {
      const int r = at[m * L + l];
      if (counts[r] > 0) staged(local(Kind::Copy, {in, in_displs[r]}, {Buf::Scratch, o}, counts[r]), l * N + m);
      o += counts[r];
    }
  Step rs;  // 1.
  rs.kind = Kind::ReduceScatter;
  rs.comm = {On::Node};
  rs.src = {Buf::Scratch, 0};
  rs.dst = {Buf::Scratch, total};
  rs.counts = node_counts;
  staged(rs, L * N);
  // 2. Each piece quantized once, piece m to node m.
  int64_t v = 0;
  for (int m = 0; m < N; ++m) {
    const int64_t n = counts[at[m * L + local_]];
    if (n > 0) {
      Step qs = local(Kind::Quantize, {Buf::Scratch, total + v}, {Buf::Records, cross_displs[m]}, n);
      qs.residual = v;
      staged(qs, L * N + 1 + m);
    }
    v += n;
  }
  staged(records_alltoallv(cross_counts, cross_displs, recv_counts, recv_displs, rec_recv), L * N + N + 1);
  // 3. The N copies of my piece summed in node order into the receive buffer.
  Step dr = local(Kind::DequantizeReduce, {Buf::Records, rec_recv}, {Buf::Recv, 0}, my_count);
  dr.parts = N;
  dr.part_bytes = recv_counts[0];
  staged(dr, L * N + N + 2);
  return out;
}

}  // namespace

Schedule build_quant_allreduce(const topo::Shape& s, int rank, int64_t n, bool in_place, const QuantParams& q) {
  QuantParams one = q;
  one.chunks = 1;
  return pipeline(n, q.chunks, [&](int64_t c) { return quant_allreduce_one(s, rank, c, in_place, one); }, q.block);
}

Schedule build_quant_reduce_scatter(const topo::Shape& s, int rank, const std::vector<int64_t>& counts, bool in_place,
                                    const QuantParams& q) {
  std::vector<int64_t> in_displs(counts.size());
  int64_t total = 0;
  bool equal = true;
  for (size_t r = 0; r < counts.size(); ++r) {
    in_displs[r] = total;
    total += counts[r];
    equal = equal && counts[r] == counts[0];
  }
  QuantParams one = q;
  one.chunks = 1;
  if (q.chunks <= 1 || !equal || counts.empty()) return quant_reduce_scatter_one(s, rank, counts, in_displs, in_place, one);
  // Chunk k: piece k of every rank's block; rank r's piece is read at r's block (in_displs, the
  // whole call's) plus the piece's offset (the chunk's displacement, added by pipeline()).
  return pipeline(counts[0], q.chunks, [&](int64_t c) {
    return quant_reduce_scatter_one(s, rank, std::vector<int64_t>(counts.size(), c), in_displs, in_place, one);
  }, q.block);
}

Schedule build_quant_allgather(const topo::Shape& s, int rank, int64_t c, bool staged_recv, const QuantParams& q) {
  Schedule out = base("allgather", q);
  const int64_t B = q.block;
  const int L = s.dims[0], N = s.nnodes;
  const std::vector<int> at = grid(s);
  const int64_t qb = quant::quantized_bytes(c, B, q.bits);
  // Scratch (values): my block [0, c) (a copy: error feedback adds to it); once quantized, the
  // staging of one received block for a receive layout that is not dense.
  // Records (bytes): mine [0, qb), the cross bundle [b1, + N qb), all P [b2, + P qb).
  const int64_t b1 = align64(qb), b2 = b1 + align64(N * qb);
  out.scratch = c;
  out.records = b2 + int64_t{L} * N * qb;
  out.residual = c;
  Step load = local(Kind::LoadBlock, {}, {Buf::Scratch, 0}, c);  // my block, packed if its layout is not dense
  load.block = rank;
  out.steps.push_back(load);
  Step qs = local(Kind::Quantize, {Buf::Scratch, 0}, {Buf::Records, 0}, c);
  qs.residual = 0;
  out.steps.push_back(qs);
  Step x;
  x.kind = Kind::Allgather;
  x.comm = {On::Cross};
  x.bytes = true;
  x.src = {Buf::Records, 0};
  x.dst = {Buf::Records, b1};
  x.count = qb;
  out.steps.push_back(x);  // bundle[m]: rank (m, my local index)
  Step y = x;
  y.comm = {On::Node};
  y.src = {Buf::Records, b1};
  y.dst = {Buf::Records, b2};
  y.count = N * qb;
  out.steps.push_back(y);  // all[l][m]
  for (int l = 0; l < L; ++l)
    for (int m = 0; m < N; ++m) {
      const int r = at[m * L + l];
      const Ref rec{Buf::Records, b2 + (int64_t{l} * N + m) * qb};
      if (!staged_recv) {
        out.steps.push_back(local(Kind::Dequantize, rec, {Buf::Recv, r * c}, c));
        continue;
      }
      out.steps.push_back(local(Kind::Dequantize, rec, {Buf::Scratch, 0}, c));
      Step st = local(Kind::StoreBlock, {Buf::Scratch, 0}, {}, c);
      st.block = r;
      out.steps.push_back(st);
    }
  return out;
}

// The planner's quantized calls (QuantBuilder, config/collectives.def): v values in all, every
// rank's block alike, never in place, the receive layout dense.
Schedule even_quant_allreduce(const topo::Shape& s, int rank, int64_t v, const QuantParams& q) {
  return build_quant_allreduce(s, rank, v, false, q);
}

Schedule even_quant_reduce_scatter(const topo::Shape& s, int rank, int64_t v, const QuantParams& q) {
  return build_quant_reduce_scatter(s, rank, split_even(v, s.size).counts, false, q);
}

Schedule even_quant_reduce_scatter_block(const topo::Shape& s, int rank, int64_t v, const QuantParams& q) {
  QuantParams b = q;
  b.block_variant = true;
  return even_quant_reduce_scatter(s, rank, v, b);
}

Schedule even_quant_allgather(const topo::Shape& s, int rank, int64_t v, const QuantParams& q) {
  return build_quant_allgather(s, rank, v / s.size, false, q);
}

Schedule no_quant(const topo::Shape&, int, int64_t, const QuantParams&) { return {}; }

}  // namespace hier::sched
