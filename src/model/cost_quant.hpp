// The planner's costing of the quantized schedules (HIER_QUANT, exec/coll_quant.cpp,
// docs/quantization.md): one more choice it weighs against its best exact plan.
//
// Allreduce on N nodes of L ranks, v values of e bytes in blocks of B (the largest shard,
// S = ceil(v/B/L)*B values, and piece, Q = ceil(S/B/N)*B values, are costed: the slowest rank):
//   reduce-scatter inside the node (L x S values)  + quantize S values
//   all-to-all across nodes of the records of Q values + dequantize-add N x Q + quantize Q
//   allgatherv across nodes (N x records of Q)      + dequantize S
//   allgatherv inside the node (L x S values)
// Reduce_scatter(_block), c = ceil(v/P) values per rank: permute copy of v values, reduce-scatter
// inside the node (L x N*c), quantize N*c, all-to-all across nodes (records of c), dequantize-add
// N x c. Allgather, c per rank: quantize c, allgather across nodes (records of c), allgather
// inside the node (N records of c), dequantize P x c.
// Each communication step is costed like a schedule step on its level (model/cost.hpp's
// step_cost, all L ranks of a node at once, plus step_overhead_ns); steps run one after the
// other; (de)quantization at Model::quant(bits)'s rates (per format: quantize per byte of float
// input; dequantize, and the fused dequantize + add, per byte of float output), each value
// counting its e bytes (float32 or float64; a 16-bit float, e = 2, counts 4 there: the kernels
// widen it to float, and 2 in the steps).
#pragma once

#include <cstdint>

#include "config/config.hpp"
#include "model/model.hpp"
#include "model/plan.hpp"
#include "topo/shape.hpp"

namespace hier::model {

// Bytes of a record stream of n values in blocks of `block` at `bits` (quant/format.hpp's
// quantized_bytes, restated: the model layer does not depend on the kernels).
int64_t quant_record_bytes(int64_t n, int64_t block, int bits);

// The smallest call (bytes, as the planner counts them) quantized at all: one block per rank
// (v >= block x ranks), below which a call is too small to cut into blocks per node and stays
// exact whatever the model says. `elem_size`: bytes per value.
int64_t quant_floor_bytes(int64_t block, int ranks, int64_t elem_size);

// The predicted time (ns) of the quantized schedule of `call` on a cartesian 2-level `shape`;
// `elem_size`: bytes per value (4: float32, 8: float64, 2: MPIX_C_FLOAT16). 0 when the collective has no quantized
// schedule.
double quant_cost(config::Coll coll, int64_t bytes, int64_t elem_size, const topo::Shape& shape, const Model& m,
                  int bits, int64_t block);

// The planner's hook: with HIER_QUANT allowing `call.coll` and the call at least the floor, sets
// p.quant_bits (the bits when the quantized schedule is predicted faster than the exact plan p
// holds, or HIER_ALGO=hier forces libhier's schedules; else 0), p.quant_ns and p.quant_why.
// Pure: only the call's sizes, the shape, the model and the configuration. The values are
// call.elem_size bytes each, for the allgather too (its exact schedule runs in bytes, but exec
// passes the receive type's size so that doubles are costed as doubles).
void weigh_quant(const Call& call, const topo::Shape& shape, const Model& m, const config::Config& cfg, Plan& p);

}  // namespace hier::model
