#include "model/cost_quant.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <string_view>
#include <vector>

#include "model/cost.hpp"
#include "sched/build.hpp"
#include "sched/pipeline.hpp"

namespace hier::model {
namespace {

using config::Coll;

// The chunk counts the planner also costs for a pipelined quantized call (HIER_CHUNK=auto).
constexpr int kQuantChunkCounts[] = {2, 4, 8};

// The row's quantized builder (config/collectives.def's QuantBuilder column); a row has one
// exactly where its Quantized column says so.
constexpr sched::QuantBuilder kQuantBuilders[] = {
#define HIER_COLL(name, key, b, nb, p, pipelined, quantized, flat, op, cartesian, any, buffers, builder, quant, ...) \
  &sched::quant,
#include "config/collectives.def"
};
static_assert(std::size(kQuantBuilders) == static_cast<size_t>(Coll::Count));
// By name, not by address: function addresses are not constants under the sanitizers.
#define HIER_COLL(name, key, b, nb, p, pipelined, quantized, flat, op, cartesian, any, buffers, builder, quant, ...) \
  static_assert((quantized > 0) == (std::string_view(#quant) != "no_quant"), #name ": Quantized and QuantBuilder disagree");
#include "config/collectives.def"

// The quantized schedule of `rank` for a call of v values (chunks: pipelined), with the level
// steps the plan chooses from `m` (direct reduce-scatter, padded allgatherv: Plan copies them
// from the model, and exec/coll_quant.cpp's builders take them from the plan), as it will run.
sched::Schedule build_quant(Coll coll, int64_t v, const topo::Shape& s, int rank, int bits, int64_t B, int chunks,
                            const Model& m) {
  const auto c = static_cast<size_t>(coll);
  if (c >= std::size(kQuantBuilders)) return {};
  sched::QuantParams q;
  q.bits = bits;
  q.block = B;
  q.chunks = chunks;
  q.direct_rs_from = m.direct_rs_from;
  q.padded_agv_from = m.padded_agv_from;
  return kQuantBuilders[c](s, rank, v, q);
}

}  // namespace

int64_t quant_record_bytes(int64_t n, int64_t block, int bits) {
  if (n <= 0) return 0;
  const int64_t full = n / block, rest = n % block;
  auto rec = [&](int64_t len) { return 4 + (bits == 8 ? len : (len + 1) / 2); };
  return full * rec(block) + (rest ? rec(rest) : 0);
}

int64_t quant_floor_bytes(int64_t block, int ranks, int64_t elem_size) { return block * ranks * elem_size; }

double quant_cost(Coll coll, int64_t bytes, int64_t e, const topo::Shape& s, const Model& m, int bits, int64_t B,
                  int chunks, bool shm, config::ShmCma cma) {
  if (!s.cartesian || s.nlevels() != 2 || e <= 0 || B <= 0) return 0;
  if (!config::quantizable(coll)) return 0;
  if (!config::quant_pipelined(coll)) chunks = 1;
  const int64_t v = bytes / e;
  if (v < s.size) return 0;
  // The rank costed: the last of the last node (the largest shard and piece: the builders' block
  // ranges grow toward the end), with its node's schedules for the flows of each step.
  int costed = 0;
  for (int r = 0; r < s.size; ++r)
    if (s.node_of[r] == s.nnodes - 1 && s.local_of[r] == s.dims[0] - 1) costed = r;
  std::vector<sched::Schedule> node;
  node.push_back(build_quant(coll, v, s, costed, bits, B, chunks, m));
  if (shm) route_inside_nodes(node.back(), s, costed, m, e, cma);
  for (int r = 0; r < s.size; ++r)
    if (r != costed && s.node_of[r] == s.node_of[costed]) {
      node.push_back(build_quant(coll, v, s, r, bits, B, chunks, m));
      if (shm) route_inside_nodes(node.back(), s, r, m, e, cma);
    }
  return cost(node, costed, s, m, e);
}

sched::Schedule build_quant_for(const Call& call, const topo::Shape& s, int rank, int bits, int64_t block, int chunks,
                                const Model& m) {
  if (!config::quantizable(call.coll) || call.elem_size <= 0) return {};
  if (!config::quant_pipelined(call.coll)) chunks = 1;
  return build_quant(call.coll, call.bytes / call.elem_size, s, rank, bits, block, chunks, m);
}

std::vector<int> quant_chunk_options(const Call& call, int ranks, const Model& m, const config::Config& cfg) {
  if (!config::quant_pipelined(call.coll) || call.elem_size <= 0) return {1};
  const int64_t v = call.bytes / call.elem_size;
  // The pipelined unit: the allreduce's vector, each rank's output of the reduce-scatter.
  const int64_t units = call.coll == Coll::Allreduce ? v : v / std::max(ranks, 1);
  if (cfg.chunk_bytes >= 0) return {sched::chunk_count(units, call.bytes, cfg.chunk_bytes, cfg.quant_block)};
  std::vector<int> out{1};
  auto offer = [&](int64_t chunk_bytes) {
    const int n = sched::chunk_count(units, call.bytes, chunk_bytes, cfg.quant_block);
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  for (int64_t c : m.chunk_bytes[static_cast<size_t>(call.coll)]) offer(c);
  // And a few chunks whatever the exact schedule's sizes: the quantized schedule's steps are
  // few and large (a node reduce-scatter, then two record exchanges across the link), so a few
  // chunks are where its node work could hide under the link's transfers; the IR's costs
  // decide (every chunk pays its steps' rounds again: with round latencies of milliseconds, as
  // measured on an oversubscribed node, one chunk stays cheapest).
  for (int n : kQuantChunkCounts) offer((call.bytes + n - 1) / n);
  return out;
}

const char* quant_too_large(Coll coll, int64_t bytes, int64_t e, int ranks, int64_t block, int bits) {
  const int64_t v = bytes / e, big = std::numeric_limits<int>::max();
  switch (coll) {
    case Coll::Allreduce:  // the records of the whole vector, reduce-scattered and gathered
      if (quant_record_bytes(v, block, bits) > big / 2) return "exact: its records exceed INT_MAX / 2 bytes";
      break;
    case Coll::ReduceScatter:
    case Coll::ReduceScatterBlock:
      if (bytes > big) return "exact: more than INT_MAX bytes";  // its exact node step's counts
      // Each rank's piece rounds its last block up: at most one more record per rank than
      // the whole vector's (the uneven counts are not in the call the planner sees).
      if (quant_record_bytes(v, block, bits) + ranks * quant_record_bytes(block, block, bits) > big / 2)
        return "exact: its records exceed INT_MAX / 2 bytes";
      break;
    case Coll::Allgather: {  // every rank's block of v / ranks values
      const int64_t c = v / std::max(ranks, 1);
      if (c > big || ranks * quant_record_bytes(c, block, bits) > big / 2)
        return "exact: its records exceed INT_MAX / 2 bytes";
      break;
    }
    default: break;
  }
  return nullptr;
}

void weigh_quant(const Call& call, const topo::Shape& s, const Model& m, const config::Config& cfg, Plan& p) {
  const config::Quant mode = cfg.quant_for(call.coll);
  if (mode == config::Quant::Off) return;
  if (!config::quantizable(call.coll)) return;
  if (!call.quantizable) return void(p.quant_why = "not MPI_SUM on float, double or float16 values");
  const int64_t e = call.elem_size;  // allgather too: the receive type's size (exec/coll_movement.cpp)
  if (e != 4 && e != 8 && e != 2) return void(p.quant_why = "not a float, double or float16 size");
  if (!s.cartesian || s.nlevels() != 2) return void(p.quant_why = "shape not cartesian with 2 levels");
  const int bits = mode == config::Quant::Int8 ? 8 : 4;
  if (call.bytes < quant_floor_bytes(cfg.quant_block, s.size, e))
    return void(p.quant_why = "exact: below one block per rank (HIER_QUANT_BLOCK)");
  if (const char* why = quant_too_large(call.coll, call.bytes, e, s.size, cfg.quant_block, bits))
    return void(p.quant_why = why);
  // The quantized schedule in each chunk count HIER_CHUNK or the model offers: the cheapest.
  // (and, under HIER_SHM=auto, with its node steps through the segment or as messages)
  for (bool shm : shm_options(cfg))
    for (int c : quant_chunk_options(call, s.size, m, cfg)) {
      const double t = quant_cost(call.coll, call.bytes, e, s, m, bits, cfg.quant_block, c, shm, cfg.shm_cma);
      if (t > 0 && (p.quant_ns <= 0 || t < p.quant_ns)) p.quant_ns = t, p.quant_chunks = c, p.quant_shm = shm;
    }
  const double exact = p.algo == sched::Algorithm::Flat ? p.flat_ns : p.hier_ns;
  // HIER_ALGO=hier takes the choice from the model: libhier's schedule, quantized where allowed
  // (on one machine, where the levels are fakes, the model would cost the "network" as memory).
  if (cfg.algo_for(call.coll) == config::Algo::Hier && p.quant_ns > 0) {
    p.quant_bits = bits;
    p.quant_why = bits == 8 ? "int8 chosen: HIER_ALGO=hier" : "int4 chosen: HIER_ALGO=hier";
  } else if (p.quant_ns > 0 && p.quant_ns < exact) {
    p.quant_bits = bits;
    p.quant_why = bits == 8 ? "int8 chosen: cheaper by the model" : "int4 chosen: cheaper by the model";
  } else {
    p.quant_why = "exact kept: cheaper by the model";
  }
}

}  // namespace hier::model
