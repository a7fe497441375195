// The machine model behind the collectives planner: per level kind (inside a node, across
// nodes) a latency, a time per byte of one flow and how that time grows when k flows cross the
// level at once; the per-byte time of local reductions and copies; which algorithm the MPI uses
// for each collective by size; optionally measured times of the MPI's own collectives, on the
// whole communicator (flat_measured) and on each level's communicators (LevelParams::steps), and
// of libhier's own schedules on the whole communicator (hier_measured). Pure
// data, read from a libhier-tune/2 file (docs/tune-file.md, model/load.hpp): the built-in files
// src/model/builtin-<family>.json, or HIER_TUNE_FILE.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/device_rates.hpp"

namespace hier::model {

enum class Family : uint8_t { OpenMPI, Mpich };
const char* to_string(Family f);  // "openmpi", "mpich"

// Where the members of a level communicator meet: in one node's memory, or across nodes.
enum class LevelKind : uint8_t { Intra, Inter };

struct FlowPoint {
  int flows = 1;
  double ns_per_byte = 0;  // of EACH flow when `flows` flows cross the level at once
};

// One measured message size of a level (hier-tune's ladder, docs/tune-file.md): the time of one
// message of `bytes` alone, and of each of `all_flows` messages sent at once (every member of a
// node sending to its partner), latency included.
struct LadderPoint {
  double bytes = 0, ns = 0, ns_all = 0;
};

struct Point {
  double bytes = 0, ns = 0;
  double measured_ns = -1;  // levels.X.steps: hier-tune's time before it took the wake-up off (reference only)
};

constexpr size_t kColls = static_cast<size_t>(config::Coll::Count);

struct LevelParams {
  double latency_ns = 0;
  double ns_per_byte = 0;            // one flow alone
  std::vector<FlowPoint> concurrent;  // ascending flows; empty: every flow at ns_per_byte
  std::vector<LadderPoint> ladder;    // ascending bytes; empty: the latency + bandwidth line
  int ladder_flows = 1;               // the flows of the ladder's ns_all
  // Measured level steps (hier-tune, levels.X.steps; docs/model.md, "Measured level steps"): the
  // MPI's own collective on this level's communicators, every communicator of the level running
  // it at once, each of `step_members` members; per collective (allreduce, allgather,
  // reduce_scatter_block, bcast), ascending bytes as the planner counts them, the slowest rank's
  // time. Empty (or step_members 0): the rounds of the MPI's algorithm (cost.cpp).
  int step_members = 0;
  std::array<std::vector<Point>, kColls> steps;
  // Per-flow ns per byte with `flows` flows at once: linear between points; above the last, the
  // level is saturated (the last point's aggregate rate shared by all flows).
  double per_flow_ns_per_byte(int flows) const;
  // One message of `bytes` with `flows` flows crossing the level at once. With a ladder:
  // piecewise linear between its sizes (below the first: the first point's time; above the
  // last: the last segment's slope), between ns (1 flow) and ns_all (ladder_flows) linear in
  // the flows, above ladder_flows the level saturated (time x flows / ladder_flows). Without:
  // latency_ns + bytes x per_flow_ns_per_byte(flows).
  double message_ns(double bytes, int flows) const;
};

// The MPI's algorithms (docs/tune-file.md, "Flat algorithms").
enum class Algo : uint8_t {
  Ring, RecursiveDoubling, Rabenseifner, RecursiveHalving, Binomial, ScatterAllgather, Bruck,
  Pairwise, Dissemination, Linear, Count
};
const char* to_string(Algo a);
bool algo_from_string(const std::string& s, Algo& a);

struct AlgoRule {
  int64_t below_bytes = std::numeric_limits<int64_t>::max();  // max: the default entry
  Algo algo = Algo::Ring;
};


// The blockwise quantization kernels' speed for one format (int8 or int4), per byte of float
// data (float32 as hier-tune measures it; a float64 value counts its 8 bytes).
struct QuantRates {
  double quantize_ns_per_byte = 0;        // of float input
  double dequantize_ns_per_byte = 0;      // of float output (allgather, allreduce's way back)
  double dequantize_add_ns_per_byte = 0;  // of the float accumulator: the fused dequantize + add
};
// Defaults when no file states them: the host kernels on the development machine (bench/quant,
// block 512, 16 MiB float32: docs/tune-file.md), one figure for both formats and both
// dequantizations, as tune files older than the per-format figures hold.
inline constexpr double kQuantizeNsPerByte = 0.17, kDequantizeNsPerByte = 0.06;
inline constexpr QuantRates kQuantRates{kQuantizeNsPerByte, kDequantizeNsPerByte, kDequantizeNsPerByte};

// A member's data movement through a level's shared segment (HIER_SHM), every member at once.
struct ShmRates {
  double copy_ns_per_byte = -1;    // into or out of a slot; < 0: Model::copy_ns_per_byte
  double reduce_ns_per_byte = -1;  // folding a peer's slot into one's own buffer; < 0: Model::reduce_ns_per_byte
  double round_ns = 20000;         // one flag round (every member raises its flag and sees the others')
  int members = 0;                 // the members it was measured with (0: not measured)
  // single copy (shm/cma.hpp): reading a peer's buffer through the kernel; < 0: not measured,
  // and the steps are costed as copy-in (hier-tune writes it only where the kernel allowed it)
  double single_ns_per_byte = -1;
};

struct Model {
  std::string source = "built-in";  // the file it came from
  Family family = Family::OpenMPI;
  int nodes = 0, ranks_per_node = 0;  // the shape it was measured on (flat_measured applies there)
  LevelParams intra, inter;
  double reduce_ns_per_byte = 0, copy_ns_per_byte = 0;
  // Blockwise quantization (HIER_QUANT, model/cost_quant.hpp), per format: [0] int8, [1] int4.
  // Optional in a tune file (compute.quant, or the older one-figure keys).
  std::array<QuantRates, 2> quant_rates{kQuantRates, kQuantRates};
  std::array<std::vector<AlgoRule>, kColls> flat_algorithms;  // empty: the fallback per collective
  std::array<std::vector<Point>, kColls> flat_measured;       // ascending bytes
  // libhier's own hierarchical schedule as HIER_ALGO=hier runs it, measured on the same shape
  // (hier-tune --hier): where present, the planner's hierarchical prediction on that shape is
  // the measurement (cost.hpp's measured_cost), the IR's costs only ranking the candidates.
  std::array<std::vector<Point>, kColls> hier_measured;       // ascending bytes
  double margin = 0.05;          // hier must be predicted this fraction faster than flat
  double step_overhead_ns = 0;   // libhier's cost per schedule step
  // How the MPI runs MPI_Scatterv / MPI_Gatherv (libhier's scatter-allgather bcast and
  // rs-reduce-gather reduce): both MPIs linearly, the root exchanging with each member in turn;
  // sequential: one message after another, each with its own latency (Open MPI's coll/basic:
  // blocking sends), else all posted at once (MPICH: one latency, the bytes one after another).
  bool scatterv_sequential = true;
  // Messages up to this size the MPI sends eagerly (0: none assumed): in a binomial bcast of
  // such messages no sender waits for its receiver, and a receiver that arrives late finds the
  // data there, so its rounds pay the transfer and no wake-up (cost.cpp; steps.eager_bytes).
  int64_t eager_bytes = 0;
  double overlap = 1.0;          // 0..1: steps of different levels in one wave
  std::array<std::vector<int64_t>, kColls> chunk_bytes;  // pipeline chunk sizes the planner tries (allreduce, bcast)
  int64_t direct_rs_from = std::numeric_limits<int64_t>::max();
  // HIER_SHM's steps (docs/shm.md): how fast a member moves data through the node's segment
  // while every member does (hier-tune's "shm" section, measured on a real segment), and the
  // flags' synchronization of one round, where every member must have run once. Without a
  // measurement: the compute rates and 20 us a round (bench/shm/bench_wait.cpp: 8 ranks on 2 cores).
  ShmRates shm;
  int64_t padded_agv_from = std::numeric_limits<int64_t>::max();
  // The MPI's own nonblocking collectives (MPI_Iallreduce, MPI_Iallgather,
  // MPI_Ireduce_scatter_block, MPI_Ibcast followed at once by MPI_Wait) on the whole
  // communicator, and libhier's nonblocking schedules the same way (hier-tune --hier), on the
  // shape of the file: a nonblocking call is planned from these (plan.cpp), ascending bytes.
  std::array<std::vector<Point>, kColls> flat_measured_nb;
  std::array<std::vector<Point>, kColls> hier_measured_nb;
  // The GPU module's rates (the tune file's "device"; model/device_rates.hpp), and where the
  // buffers of the calls costed with this model live: Host, except in the copy that plan()
  // makes for a device-bound communicator (model/cost_device.hpp's on_device).
  DeviceRates device = builtin_device_rates();
  Placement placement = Placement::Host;

  const LevelParams& level(LevelKind k) const { return k == LevelKind::Intra ? intra : inter; }
  // The kernels' rates for `bits` (8: int8, 4: int4).
  const QuantRates& quant(int bits) const { return quant_rates[bits == 4 ? 1 : 0]; }
  QuantRates& quant(int bits) { return quant_rates[bits == 4 ? 1 : 0]; }
  // The MPI's algorithm for `coll` at `bytes` (bytes as the planner counts them).
  Algo flat_algorithm(config::Coll coll, int64_t bytes) const;
};

}  // namespace hier::model
