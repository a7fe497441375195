// The planner's costing of the quantized schedules (HIER_QUANT, exec/coll_quant.cpp,
// docs/quantization.md): one more choice it weighs against its best exact plan.
//
// Costed from the IR, like every other schedule: the very schedules the executor runs
// (sched/build_quant.cpp, pipelined in `chunks` chunks where asked) are walked by model/cost.hpp's
// cost() for the last rank of the last node (the largest shard and piece), with its node's
// schedules giving each step's flows (all L ranks of a node cross at once). cost() knows the
// quantized steps: Quantize, Dequantize and DequantizeReduce at Model::quant(bits)'s rates (per
// byte of float values: quantize per byte of input; dequantize, and the fused dequantize + add
// once per record summed, per byte of output), the steps on records (Alltoallv as an alltoall of
// its largest piece, allgather(v)s) in bytes; each communication step plus step_overhead_ns; in a
// pipelined schedule the waves overlap the two levels (Model::overlap) while the kernels, copies
// and reductions add up. Unchunked this is, step for step, the sum the earlier closed form gave:
// Allreduce on N nodes of L ranks, v values of e bytes in blocks of B (shard S values, piece Q):
//   reduce-scatter inside the node (L x S values)  + quantize S values
//   all-to-all across nodes of the records of Q values + dequantize-add N x Q + quantize Q
//   allgatherv across nodes (N x records of Q)      + dequantize S
//   allgatherv inside the node (L x S values)
// Reduce_scatter(_block), c values per rank: permute copy of v values, reduce-scatter inside the
// node (L x N*c), quantize N*c, all-to-all across nodes (records of c), dequantize-add N x c.
// Allgather, c per rank: load (copy) c, quantize c, allgather across nodes (records of c),
// allgather inside the node (N records of c), dequantize P x c.
// Values of a 16-bit float (e = 2) move 2 bytes in the communication steps and count 4 in the
// (de)quantization steps: the kernels widen them to float.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"
#include "model/plan.hpp"
#include "sched/ir.hpp"
#include "topo/shape.hpp"

namespace hier::model {

// Bytes of a record stream of n values in blocks of `block` at `bits` (quant/format.hpp's
// quantized_bytes, restated: the model layer does not depend on the kernels).
int64_t quant_record_bytes(int64_t n, int64_t block, int bits);

// Why a quantized schedule of the call cannot run (nullptr: it can): the byte counts of its level
// collectives are ints, so the records of the whole call must stay within INT_MAX / 2 bytes and
// its values within INT_MAX (exec/coll_quant.cpp's entry points rely on it: a plan that says
// quantized is run quantized). `e`: bytes per value; reduce-scatters bounded for any counts.
const char* quant_too_large(config::Coll coll, int64_t bytes, int64_t e, int ranks, int64_t block, int bits);

// The smallest call (bytes, as the planner counts them) quantized at all: one block per rank
// (v >= block x ranks), below which a call is too small to cut into blocks per node and stays
// exact whatever the model says. `elem_size`: bytes per value.
int64_t quant_floor_bytes(int64_t block, int ranks, int64_t elem_size);

// The predicted time (ns) of the quantized schedule of `call` on a cartesian 2-level `shape`;
// `elem_size`: bytes per value (4: float32, 8: float64, 2: MPIX_C_FLOAT16); `chunks`: pipelined in that many chunks
// (allreduce and reduce_scatter_block; the others ignore it). 0 when the collective has no
// quantized schedule.
// `shm`: HIER_SHM: the steps inside a node through shared memory (route_inside_nodes), single
// copy as HIER_SHM_CMA (`cma`) chooses.
double quant_cost(config::Coll coll, int64_t bytes, int64_t elem_size, const topo::Shape& shape, const Model& m,
                  int bits, int64_t block, int chunks = 1, bool shm = false,
                  config::ShmCma cma = config::ShmCma::Auto);

// The quantized schedule of `rank` the planner costs for `call` (call.bytes / call.elem_size
// values, every rank's block alike, never in place) at `bits`, in blocks of `block`, cut into
// `chunks` where the row pipelines it: the one the executor runs for the plan's quant_bits and
// quant_chunks (tests/coll/test_costed.cpp compares them). Empty for a row without one.
sched::Schedule build_quant_for(const Call& call, const topo::Shape& shape, int rank, int bits, int64_t block,
                                int chunks, const Model& m);

// The chunk counts the planner tries for the quantized schedule of `call` on `ranks` ranks:
// HIER_CHUNK's one (cut at cfg.quant_block boundaries), or 1, those of the model's
// chunk_bytes for the collective and 2, 4 and 8 chunks (HIER_CHUNK=auto). {1} where the schedule
// is not pipelined.
std::vector<int> quant_chunk_options(const Call& call, int ranks, const Model& m, const config::Config& cfg);

// The planner's hook: with HIER_QUANT allowing `call.coll` and the call at least the floor, sets
// p.quant_bits (the bits when the quantized schedule is predicted faster than the exact plan p
// holds, or HIER_ALGO=hier forces libhier's schedules; else 0), p.quant_ns, p.quant_chunks (the
// cheapest of quant_chunk_options) and p.quant_why.
// Pure: only the call's sizes, the shape, the model and the configuration. The values are
// call.elem_size bytes each, for the allgather too (its exact schedule runs in bytes, but exec
// passes the receive type's size so that doubles are costed as doubles).
void weigh_quant(const Call& call, const topo::Shape& shape, const Model& m, const config::Config& cfg, Plan& p);

}  // namespace hier::model
