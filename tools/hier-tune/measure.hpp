// hier-tune's measurement families (one file each) and what they share: timing, the job's node
// shape, the JSON they return. hier_tune.cpp (main) runs them and writes the file.
#pragma once

#include <mpi.h>

#include <chrono>
#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "model/tune_schema.hpp"

namespace hier::tune {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// ---- timing.cpp
// Seconds per call of fn() on this rank alone: the median of 5 batches, each at least
// `batch_seconds` long (set_batch; --quick shortens it).
void set_batch(double batch_seconds);
double seconds(const std::function<void()>& fn);
double now();
double median(std::vector<double> v);
// Median over `reps` repetitions (after one warm-up) of the slowest rank's time of fn(), every
// repetition started together (barrier) on `comm`.
double timed(MPI_Comm comm, int reps, const std::function<void()>& fn);

// ---- shape.cpp: the job's nodes (topo::discover's "node" level: MPI_COMM_TYPE_SHARED)
struct Shape {
  int rank = 0, size = 1, local = 0, ppn = 1, node = 0, nodes = 1;
  bool uniform = true;  // same ranks on every node, placed node by node
  MPI_Comm node_comm = MPI_COMM_NULL;
};
Shape shape();

// World rank of member `local` of node `node`, or -1 (gathered once).
struct RankMap {
  std::vector<int> node, local;
  int find(int n, int l) const {
    for (size_t r = 0; r < node.size(); ++r)
      if (node[r] == n && local[r] == l) return static_cast<int>(r);
    return -1;
  }
};
RankMap rank_map(const Shape& s);

// ---- levels.cpp: levels.intra / levels.inter and their measured steps
// One level: latency of pair (a0, b0), and k = 1..max_flows flows, flow i from node_a's member
// sa(i) to node_b's member sb(i).
// latency_ns is the larger of the ping-pong and the busy latency (busy_latency_ns on `busy`, a
// communicator of `busy_members` ranks of this level); both are kept in the file for reference.
model::LevelParams measure_level(const Shape& s, const RankMap& m, int na, int nb, const std::function<int(int)>& la,
                                 const std::function<int(int)>& lb, int max_flows, bool quick, bool ladder,
                                 std::vector<char>& buf, MPI_Comm busy, int busy_members, model::LevelNotes& notes);
// Measured level steps (levels.X.steps: out.step_members, out.steps) on `level`, less
// `start_ns` (levels.cpp says how).
void measure_steps(MPI_Comm level, int members, bool quick, double start_ns, model::LevelParams& out);

// ---- colls.cpp: flat_measured / hier_measured and their _nonblocking twins
// Four collectives on MPI_COMM_WORLD, 64 KiB .. 16 MiB, bytes as the planner counts them:
// the MPI's own (PMPI_*: flat_measured), or through libhier (MPI_*: hier_measured, with
// libhier preloaded and HIER_ALGO=hier, so that its hierarchical schedules run); `nonblocking`:
// MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Ibcast, each followed at once
// by MPI_Wait.
using Measured = std::array<std::vector<model::Point>, model::kColls>;
Measured measure_colls(const Shape& s, bool quick, bool through_libhier, bool nonblocking);
// Whether libhier.so is loaded in this process (preloaded by hier-run or LD_PRELOAD).
bool libhier_loaded();

// ---- compute.cpp: compute (reduction, copy, quantization kernels) into doc.model
void measure_compute(bool quick, int64_t quant_block, model::TuneDoc& doc);

// ---- device.cpp: the GPU module's rates (the "device" section) on this rank; false (nothing
// measured) without a GPU runtime or a module that loads (HIER_GPU_MODULE).
bool measure_device(bool quick, int64_t quant_block, model::DeviceRates& out);

// ---- shm.cpp: the node segment's copy and reduce rates and flag round (the "shm" section);
// false (nothing measured) where a node has one rank or a segment could not be mapped.
bool measure_shm(const Shape& s, bool quick, model::ShmRates& out);

// ---- dtype.cpp: the datatype engine's model (libhier-tune/1's "p2p" object); `pair`: ranks 0
// and 1 (MPI_COMM_NULL elsewhere), for the end-to-end messages.
json measure_dtype(int rank, int size, bool quick, MPI_Comm pair);

}  // namespace hier::tune
