// The collectives planner: ONE pure function. From the call, the level shape, the machine model
// and the configuration it decides flat or hierarchical, which algorithm, how many pipeline
// chunks and how the level steps run, by costing libhier's candidate schedules (the very
// builders the executor runs) against the MPI's own algorithm (model/cost.hpp). No global state
// is read: every input is identical on every rank of the communicator (the sizes of the whole
// call, the shape computed from one allgathered table, the process's model read from the same
// file, the configuration from the same environment), so every rank decides alike: a rank going
// hier while another goes flat would deadlock.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"
#include "sched/build.hpp"
#include "topo/shape.hpp"

namespace hier::model {

struct Call {
  config::Coll coll = config::Coll::Allreduce;
  int64_t bytes = 0;      // allreduce/reduce/bcast: the vector; reduce_scatter/allgather(v): the whole
                          // vector; alltoall: what one rank sends; barrier: 0
  int64_t elem_size = 1;  // bytes per unit of the schedule (the datatype's size; 1 for byte schedules;
                          // allgather: the receive type's size, which only its quantized cost uses)
  // Whether the call's op and values allow a quantized schedule (the executor says, from what every
  // rank shares: MPI_SUM on float, double or float16, or an allgather of such values:
  // exec::quantizable_reduction / quant_elem). The planner weighs quantization only then, so that
  // its plan.quant_bits is the one decision the executor runs.
  bool quantizable = true;
  // A nonblocking or persistent call (MPI_I*, MPI_*_init): planned from the nonblocking figures
  // where the model has them (Model::flat_measured_nb, hier_measured_nb), since the MPI's
  // nonblocking algorithms are not its blocking ones.
  bool nonblocking = false;
  // Where the buffers live, as the communicator agreed (exec/prepare.cpp from Context::device_hier
  // and device_stage): a device-bound call is costed with the device's rates (model/cost_device.hpp).
  Placement where = Placement::Host;
};

struct Plan {
  sched::Algorithm algo = sched::Algorithm::Flat;
  int chunks = 1;  // pipeline chunks (allreduce, bcast); 1: not pipelined
  // How level steps run (exec/direct.hpp): reduce-scatter steps of at least this many input
  // bytes by direct exchange; allgatherv steps of at least this many bytes as a padded allgather.
  int64_t direct_rs_from = std::numeric_limits<int64_t>::max();
  int64_t padded_agv_from = std::numeric_limits<int64_t>::max();
  double hier_ns = 0, flat_ns = 0;  // predicted (0: not costed)
  const char* why = "";
  // HIER_QUANT (model/cost_quant.hpp): the bits to quantize with when the quantized schedule is
  // predicted faster than the exact plan above (0: exact), its predicted time (0: not costed).
  // With quant_bits set and algo Flat, a call the quantized path declines runs flat (the MPI).
  int quant_bits = 0;
  double quant_ns = 0;
  int quant_chunks = 1;  // the quantized schedule pipelined in this many chunks (sched::QuantParams)
  const char* quant_why = "";
  // HIER_SHM: whether the level steps inside a node run through the node's segment (Via::Shm),
  // for the exact schedule and for the quantized one: on: always; off: never; auto: where the
  // model, from hier-tune's measured segment (Model::shm), predicts them cheaper.
  bool shm = false, quant_shm = false;
  // An allreduce's cross-node step as reduce-scatter + allgather(v) instead of the MPI's
  // allreduce (sched::build_allreduce's ordered_top): a nonblocking rs-ar-ag call, whose
  // in-place MPI_Iallreduce Open MPI runs as a reduce then a bcast (plan.cpp).
  bool split_top = false;
};

// The transports the planner weighs under HIER_SHM (off: messages; on: the segment; auto: both).
std::vector<bool> shm_options(const config::Config& cfg);

// E.g. "hier rs-ar-ag, 4 chunks: predicted 1.20 ms vs flat 2.31 ms (cheaper by the model)".
std::string describe(const Plan& p);

// `cfg`: HIER_ALGO for this collective and HIER_CHUNK (its chunk_bytes: -1 = the model's candidates).
Plan plan(const Call& call, const topo::Shape& shape, const Model& m, const config::Config& cfg);

// The predicted time of the hierarchical algorithm `a` in `chunks` chunks (the schedules of the
// first node's ranks, costed for its first rank). Exposed for tests and hier-sim.
// `shm`: HIER_SHM: the steps inside a node through shared memory (route_inside_nodes), single
// copy as HIER_SHM_CMA (`cma`) chooses.
double hier_cost(const Call& call, const topo::Shape& shape, const Model& m, sched::Algorithm a, int chunks,
                 bool shm = false, config::ShmCma cma = config::ShmCma::Auto);

// The schedule of `rank` that hier_cost costs for algorithm `a` in `chunks` chunks (bcast and
// reduce rooted at rank 0), carrying the model's choices of level steps
// (Schedule::direct_rs_from / padded_agv_from) as the plan hands them to the executor.
sched::Schedule build_for(const Call& call, const topo::Shape& shape, int rank, sched::Algorithm a, int chunks,
                          const Model& m);

// The smallest bytes (a power of 4) from which plan() goes hierarchical for `coll` on any of a
// few probe shapes (the model's own, 2x2, 2x4, 4x2, 4x4), divided by 4: the cheap pre-check of
// calls made before a communicator's levels exist (0: from any size; max: never). Pure.
// `settings`: the process's HIER_SHM (the node steps costed as it routes them) and HIER_QUANT
// (also where the quantized schedule, with its quant and quant_block settings, wins); null: the
// defaults.
int64_t hier_from(const Model& m, config::Coll coll, const config::Config* settings = nullptr);
std::array<int64_t, kColls> hier_from(const Model& m, const config::Config& settings);

// Cheap pre-check, before any level communicator exists: false when the call goes flat whatever
// the shape (HIER_ALGO=flat, or below `from`, hier_from(model, call.coll)).
bool worth_building(const Call& call, int64_t from, const config::Config& cfg);

}  // namespace hier::model
