// One builder per collective and algorithm. Each returns the steps of ONE rank (`rank`, in the
// user communicator) from the shape alone: no MPI, so the unit tests run them for every rank.
// Preconditions (the planner checks them): the shape is hierarchical, and cartesian where the
// algorithm says so.
#pragma once

#include <climits>
#include <cstdint>
#include <vector>

#include "sched/ir.hpp"
#include "topo/shape.hpp"

namespace hier::sched {

// The algorithms. Cartesian ones use the step / node / cross communicators; Tree ones only the
// node and leaders communicators, so they also serve uneven shapes.
enum class Algorithm : uint8_t {
  Flat,
  RsArAg,            // allreduce: reduce-scatter up the levels, allreduce across nodes, allgather down
  TreeAllreduce,     // allreduce: reduce to node leaders, allreduce among them, bcast in the node
  RsLevels,          // reduce_scatter(_block): reduce-scatter level by level (cartesian)
  AgLevels,          // allgather(v): allgather level by level, outermost first (cartesian)
  ScatterAllgather,  // bcast: scatter in the root's node, bcast across, allgather in every node
  TwoStep,           // bcast / reduce: across nodes at the root's node position, then within nodes
  Tree,              // bcast / reduce / barrier / gather / scatter through node leaders (any shape)
  RsReduceGather,    // reduce: reduce-scatter in nodes, reduce across, gather in the root's node
  TwoPhase,          // alltoall: exchange within the node, then across nodes (cartesian)
};
const char* to_string(Algorithm a);

// `ordered_top`: the cross-node step is reduce_scatter + allgatherv instead of PMPI_Allreduce,
// so that every element is reduced exactly once (user-defined ops that may not be bitwise
// commutative still give the same bits on every rank).
Schedule build_allreduce(const topo::Shape& s, int rank, int64_t n, bool in_place, Algorithm a, bool ordered_top);
// counts[r]: elements rank r receives (reduce_scatter_block: all equal).
Schedule build_reduce_scatter(const topo::Shape& s, int rank, const std::vector<int64_t>& counts, bool in_place);
// counts[r]: bytes of rank r's block.
Schedule build_allgather(const topo::Shape& s, int rank, const std::vector<int64_t>& counts);
Schedule build_bcast(const topo::Shape& s, int rank, int64_t bytes, int root, Algorithm a);
Schedule build_reduce(const topo::Shape& s, int rank, int64_t n, int root, bool in_place, Algorithm a);
Schedule build_barrier(const topo::Shape& s, int rank);
// block: bytes per (source, destination) pair.
Schedule build_alltoall(const topo::Shape& s, int rank, int64_t block);
// b: bytes of each rank's block. Tree only (sched/build_gather.cpp). `in_place`: the root passed
// MPI_IN_PLACE as its receive buffer (scatter; a gather's root in place needs no other form).
Schedule build_gather(const topo::Shape& s, int rank, int64_t b, int root);
Schedule build_scatter(const topo::Shape& s, int rank, int64_t b, int root, bool in_place);

// The call the planner costs (model/plan.cpp), one function per builder, named by the Builder
// column of config/collectives.def: `units` units of `unit_bytes` bytes each (the planner's
// model::Call: bytes / elem_size), every rank's block alike, rooted at rank 0, never in place.
// One signature for all, so that the planner calls a row's builder from the table alone, and
// pipelines it (sched/pipeline.hpp) by calling it per chunk of units. Each lives beside its builder.
using EvenBuilder = Schedule (*)(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a);
Schedule even_allreduce(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a);
Schedule even_reduce_scatter(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a);
Schedule even_allgather(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a);
Schedule even_bcast(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a);
Schedule even_reduce(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a);
Schedule even_barrier(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a);
Schedule even_alltoall(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a);
Schedule even_gather(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a);
Schedule even_scatter(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a);

// Quantized schedules (sched/build_quant.cpp) on a cartesian 2-level shape, in values of the
// call's float / double element type (Records in bytes).
struct QuantParams {
  int bits = 8;
  int64_t block = 512;                 // HIER_QUANT_BLOCK
  int64_t direct_rs_from = INT64_MAX;  // the plan's choices of level steps (Schedule)
  int64_t padded_agv_from = INT64_MAX;
  bool block_variant = false;          // reduce_scatter_block (the name only)
  // Chunk pipelining (sched/pipeline.hpp; the plan's Plan::quant_chunks): the allreduce, and the
  // reduce-scatter when every rank receives the same count, cut into this many chunks at block
  // boundaries (at most one chunk per block); the allgather ignores it.
  int chunks = 1;
};
Schedule build_quant_allreduce(const topo::Shape& s, int rank, int64_t n, bool in_place, const QuantParams& q);
// counts[r]: values rank r receives.
Schedule build_quant_reduce_scatter(const topo::Shape& s, int rank, const std::vector<int64_t>& counts, bool in_place,
                                    const QuantParams& q);
// c values per rank; `staged_recv`: this rank's receive layout is not dense (each block is
// dequantized into scratch and stored through the user's datatype: StoreBlock).
Schedule build_quant_allgather(const topo::Shape& s, int rank, int64_t c, bool staged_recv, const QuantParams& q);
// The quantized call the planner costs (model/cost_quant.cpp), one per row of config/collectives.def
// (its QuantBuilder column): v values in all, split as the even_* builders split them, never in
// place; no_quant (an empty schedule) for the rows without one (Quantized 0).
using QuantBuilder = Schedule (*)(const topo::Shape& s, int rank, int64_t v, const QuantParams& q);
Schedule even_quant_allreduce(const topo::Shape& s, int rank, int64_t v, const QuantParams& q);
Schedule even_quant_reduce_scatter(const topo::Shape& s, int rank, int64_t v, const QuantParams& q);
Schedule even_quant_reduce_scatter_block(const topo::Shape& s, int rank, int64_t v, const QuantParams& q);
Schedule even_quant_allgather(const topo::Shape& s, int rank, int64_t v, const QuantParams& q);
Schedule no_quant(const topo::Shape& s, int rank, int64_t v, const QuantParams& q);

// n units split into `parts` nearly equal parts (the first n % parts one larger).
struct Split {
  std::vector<int64_t> counts, displs;
};
Split split_even(int64_t n, int parts);

// An Allgatherv step whose counts are all equal becomes the cheaper Allgather.
void uniform_to_allgather(Step& ag);

}  // namespace hier::sched
