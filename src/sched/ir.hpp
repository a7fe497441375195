// The schedule IR: a collective as data. A schedule is a list of steps for ONE rank; each step
// is a local copy or a collective (or p2p) on one level communicator over ranges of named
// buffers. Offsets and counts are in units: elements of the user's datatype for reductions
// (so the schedule never depends on the datatype's layout), bytes for data movement.
// Schedules are built by the builders (sched/build_*.cpp) from a topo::Shape alone, so they can
// be printed (HIER_DEBUG=TRACE), cached and unit-tested without MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hier::sched {

enum class Unit : uint8_t { Elements, Bytes };

// Named buffers. For byte schedules Send/Recv are the user's data as bytes (the executor stages
// non-contiguous datatypes); Scratch is libhier's. Records: libhier's quantized records
// (quant/format.hpp: per block a float32 scale and int8 / int4 values) of quantized schedules;
// offsets into it are always in bytes.
enum class Buf : uint8_t { Send, Recv, Scratch, Records };

struct Ref {
  Buf buf = Buf::Scratch;
  int64_t off = 0;
  bool operator==(const Ref&) const = default;
};

// Which level communicator a step runs on (topo::Levels).
enum class On : uint8_t { None, Step, Node, Cross, Leaders };
struct CommRef {
  On on = On::None;
  int level = 0;  // for On::Step
  bool operator==(const CommRef&) const = default;
};

// How a level step reaches its peers: the MPI's messages, or the shared-memory segment of its
// level communicator (HIER_SHM; exec/shm_steps.hpp). The transport only: both give results of
// the same bits where they reduce in the same order (docs/shm.md). Where the data lives
// (host / device) is not a step's business: the executor's buffer binding says it per buffer
// (exec::Binding::loc), so one schedule serves host and device buffers alike.
enum class Via : uint8_t { Mpi, Shm };

enum class Kind : uint8_t {
  Copy,           // local: count units src -> dst (typed for element schedules)
  LoadBlock,      // bytes: the user's send block `block` (alltoall) -> dst
  StoreBlock,     // bytes: src -> the user's receive block `block`
  ReduceScatter,  // src (sum of counts) -> dst (counts[me]); PMPI_Reduce_scatter(_block)
  Allreduce,      // src -> dst, or in place on dst
  Allgather,      // src (count) -> dst (count per member), or in place on dst
  Allgatherv,     // src (counts[me]) -> dst at displs, or in place on dst
  Bcast,          // dst, count, root
  Scatterv,       // root: src at displs -> members (root in place on dst); others: dst
  Gatherv,        // members' src -> root's dst at displs (root in place)
  Reduce,         // src -> root's dst (root may be in place on dst)
  Alltoall,       // src (count per member) -> dst (count per member)
  Barrier,
  Send,           // count units of src to `peer`
  Recv,           // count units from `peer` into dst
  // Quantized schedules (sched/build_quant.cpp; Schedule::quant_bits, quant_block):
  Alltoallv,         // src at displs (counts per member) -> dst at rdispls (rcounts per member)
  Quantize,          // local: count values at src -> their records at dst; `residual` >= 0: error
                     //   feedback (src += residual, then residual = src - deq(records)), when the
                     //   call site has one (exec: Binding::residual)
  Dequantize,        // local: the records of count values at src -> values at dst
  DequantizeReduce,  // local: dst = sum over k = 0..parts-1, in that order, of the values of the
                     //   records at src + k * part_bytes (count values each); dst zeroed first
};

struct Step {
  Kind kind = Kind::Copy;
  CommRef comm;
  Via via = Via::Mpi;  // level steps: set by route_shm (sched/transport.hpp) where the plan routes them
  // Via::Shm steps: single copy (the peers' buffers read through the kernel) rather than copy-in
  // through the slots; the plan's choice (model::route_inside_nodes), which the executor runs.
  bool single = false;
  Ref src, dst;
  bool in_place = false;
  int64_t count = 0;
  int root = 0;   // rank in `comm` (Bcast, Scatterv, Gatherv, Reduce); peer for Send/Recv
  int block = 0;  // LoadBlock / StoreBlock: user block index (a rank of the user communicator)
  std::vector<int64_t> counts, displs;  // per member of `comm`
  std::vector<int64_t> rcounts, rdispls;  // Alltoallv: what each member sends me, and where
  bool bytes = false;     // level steps on records: counts and displacements in bytes (MPI_BYTE)
  int64_t residual = -1;  // Quantize: value offset in the call site's residual; -1: none
  int parts = 0;          // DequantizeReduce: records summed
  int64_t part_bytes = 0;  // DequantizeReduce: bytes between them
  // Chunk pipelining (sched/pipeline.hpp). stage: the step's place in the algorithm, the same
  // for matching steps on every rank even where a rank skips a stage (-1: its index in the
  // list). wave: consecutive steps with one wave >= 0 run at once, started nonblocking and
  // completed together; -1: the step runs alone, blocking.
  int stage = -1;
  int wave = -1;
};

struct Schedule {
  std::string name;      // e.g. "allreduce/rs-ar-ag"
  Unit unit = Unit::Elements;
  int64_t scratch = 0;   // units of scratch the steps use
  bool reads_recv = false;   // byte schedules: Recv holds input (bcast root, in-place)
  bool writes_recv = false;  // byte schedules: Recv is written as bytes (bcast)
  int chunks = 1;            // pipelined: the call cut into this many chunks
  // How the executor runs level steps (the planner's choice, model/plan.hpp; exec/direct.hpp):
  // reduce-scatter steps of at least this many input bytes by direct exchange, allgatherv steps
  // of at least this many bytes in all as an allgather of padded pieces. Max: never.
  int64_t direct_rs_from = INT64_MAX, padded_agv_from = INT64_MAX;
  // Quantized schedules: bits per value (8 or 4; 0: exact), values per block, bytes of the
  // Records buffer, values of the call site's residual (error feedback) the steps address.
  int quant_bits = 0;
  int64_t quant_block = 0, records = 0, residual = 0;
  std::vector<Step> steps;
};

// How a ReduceScatter or Allgatherv level step runs: as the MPI's collective, or as libhier's own
// exchange (exec/direct.hpp: a direct reduce-scatter, an allgather of padded pieces). Decided
// here once, from the plan's threshold the schedule carries (Schedule::direct_rs_from /
// padded_agv_from) and the step's size: the executor runs what this says and the model
// (model/cost.cpp) costs what this says. `elem_bytes`: bytes per element of an element schedule,
// 0 for a byte schedule; a step on records (Step::bytes) counts bytes. A direct reduce-scatter
// needs an element type (it reduces), so a byte step never takes it.
bool direct_reduce_scatter(const Step& st, int64_t elem_bytes, int64_t from);
bool padded_allgatherv(const Step& st, int64_t elem_bytes, int64_t from);

// The end of the group of steps that starts at step i: the consecutive steps of its wave
// (started together; step k of a group takes slot k of the executor's scratch and staging), or
// i + 1 for a step alone (wave -1). The executor, its reservations at the cache miss and the
// model all walk a schedule group by group with it.
size_t group_end(const Schedule& s, size_t i);

// The sum of the counts of the steps of kind `k` (e.g. the values a quantized schedule
// quantizes, over all its chunks when pipelined).
int64_t count_of(const Schedule& s, Kind k);

const char* to_string(Kind k);
const char* to_string(Via v);
std::string to_string(const CommRef& c);
std::string to_string(const Ref& r);
// One line per step, for HIER_DEBUG=TRACE and the unit tests' failure messages.
std::string to_string(const Schedule& s);

}  // namespace hier::sched
