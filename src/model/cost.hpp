// Predicted time of a schedule and of the MPI's own (flat) collective, from a Model.
//
// A collective of m members is costed as the rounds of its algorithm (model.hpp's Algo): each
// round costs latency + bytes x the per-flow time per byte with as many flows as cross the
// level at once, plus the local reduction of what it received. A schedule step on a level
// communicator is such a collective on its level (inside a node: "intra"; across nodes:
// "inter"), costed with the algorithm the MPI uses for that collective and size; the flows of a
// step are the ranks of the node that run the same step at once (every node position crossing
// together, or the root's alone). Steps run one after another; in a pipelined wave the
// communication on the two levels overlaps (Model::overlap) while the CPU's work (copies,
// reductions, quantization) does not. The flat collective is the same algorithm on the whole
// communicator, each round costed on the level its messages cross (ranks placed node by node),
// or the MPI's measured time when the model has points for this very shape. Likewise a level
// step whose collective the tune file measured on that level's communicators (levels.X.steps:
// same member count, every communicator of the level at once) takes the measured time,
// interpolated in bytes ("Measured level steps", docs/model.md); below the first point, on
// other member counts and on levels hier-tune does not measure, the rounds above.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/model.hpp"
#include "sched/ir.hpp"
#include "topo/shape.hpp"

namespace hier::model {

// The sum of a step's per-member counts (cost.cpp and cost_device.cpp).
inline int64_t counts_total(const std::vector<int64_t>& v) {
  int64_t t = 0;
  for (int64_t x : v) t += x;
  return t;
}

// The operation a collective (or a level step) performs, for costing.
enum class Op : uint8_t { Allreduce, ReduceScatter, Allgather, Bcast, Reduce, Barrier, Alltoall, Scatter, Gather };
Op op_of(config::Coll c);

// How the messages of one round travel.
class Net {
 public:
  virtual ~Net() = default;
  // Every member sends `bytes` to the member `d` ranks further (mod m).
  virtual double shift(int64_t d, double bytes) const = 0;
  // Every member exchanges `bytes` with the member whose rank differs by xor `d`.
  virtual double exchange(int64_t d, double bytes) const = 0;
  // Members at multiples of 2d send `bytes` to the member d further (a binomial tree's round).
  virtual double tree(int64_t d, double bytes) const = 0;
};

// Every message on one level with `flows` flows at once.
class LevelNet : public Net {
 public:
  LevelNet(const LevelParams& p, int flows) : p_(p), flows_(flows) {}
  double shift(int64_t, double bytes) const override { return p_.message_ns(bytes, flows_); }
  double exchange(int64_t, double bytes) const override { return p_.message_ns(bytes, flows_); }
  double tree(int64_t, double bytes) const override { return p_.message_ns(bytes, flows_); }

 private:
  const LevelParams& p_;
  int flows_;
};

// A whole communicator of `nodes` x `ranks_per_node` ranks placed node by node: a round costs
// its slowest part, the messages inside a node or those crossing to another.
class FlatNet : public Net {
 public:
  FlatNet(const Model& m, int nodes, int ranks_per_node) : m_(m), nodes_(nodes), ppn_(ranks_per_node) {}
  double shift(int64_t d, double bytes) const override;
  double exchange(int64_t d, double bytes) const override;
  double tree(int64_t d, double bytes) const override;

 private:
  double round(int inside, int crossing, double bytes) const;
  const Model& m_;
  int nodes_, ppn_;
};

// The rounds of `algo` performing `op` over `members` members on `net`; `bytes` as the planner
// counts them for the collective (allgather: the whole output, reduce_scatter: the whole input,
// alltoall: what one rank sends, scatter/gather: the whole vector at the root).
double algo_cost(Op op, Algo algo, double bytes, int members, const Net& net, double reduce_ns_per_byte);

// A binomial bcast of `bytes` over `members` whose messages the MPI sends eagerly
// (Model::eager_bytes): its rounds' transfers without a wake-up (no sender waits for its
// receiver; a late receiver finds the data there: MPICH's 4 KiB bcast measured 0.16 ms on 2 x 4,
// where three waited-for rounds would take 25 ms). -1 where it does not apply.
double eager_bcast(Algo algo, double bytes, int members, const Net& net, const Model& m);

// Whether the model's measured points (flat_measured, hier_measured) apply on `shape`: the shape
// they were measured on (Model::nodes x ranks_per_node, every node alike, ranks across nodes).
bool measured_shape(const topo::Shape& shape, const Model& m);
// A measured time at `bytes` from ascending points: at a point its time, between two points
// log-log interpolated; outside them `model` (the model's cost at `bytes`) scaled by the nearest
// point's time over model_at(its bytes); without points `model`.
double measured_cost(const std::vector<Point>& pts, double bytes, double model,
                     const std::function<double(double)>& model_at);

// The MPI's own collective on a communicator of `shape` (bytes as the planner counts them);
// `nonblocking`: its nonblocking call, from Model::flat_measured_nb where measured on this shape.
double flat_cost(config::Coll coll, int64_t bytes, const topo::Shape& shape, const Model& m, bool nonblocking = false);
// The same from the algorithm alone (never the measured points).
double flat_algo_cost(config::Coll coll, int64_t bytes, int nodes, int ranks_per_node, const Model& m);

// A schedule's predicted time. `node[0]` is the rank costed; the others are the schedules of the
// rest of its node (they give the flows of each step; empty or one: every rank of the node runs
// every step). `unit_bytes`: bytes per unit (element schedules: the datatype's size).
double cost(const std::vector<sched::Schedule>& node, int rank, const topo::Shape& shape, const Model& m,
            int64_t unit_bytes);

// HIER_SHM as the plan decides it, for `rank`'s schedule: the level steps the transport runs on
// the communicators inside a node (sched::route_shm's rule: the node, and every cartesian step
// level but the outermost) of 2 members or more marked Via::Shm, and each marked step's form
// (Step::single) chosen by shm_single. The executor routes the schedules it runs with this very
// function (exec::route_shm, at the cache miss); where it cannot run what it says (no segment on
// that communicator, the kernel refuses single copy), it falls back and counts it in the report.
// `unit_bytes`: bytes per unit of an element schedule (its datatype's size).
void route_inside_nodes(sched::Schedule& s, const topo::Shape& shape, int rank, const Model& m, int64_t unit_bytes,
                        config::ShmCma cma = config::ShmCma::Auto);

// Whether a step through the segment runs single copy (HIER_SHM_CMA: `cma`): off: never; on:
// a reduce-scatter, allgather(v), bcast or reduce whose bytes make it pay (shm::single_copy_pays);
// auto: those where shm_single_cheaper says so. The same on every member of the step.
bool shm_single(const sched::Step& st, int members, int64_t unit_bytes, const Model& m, config::ShmCma cma);

// Whether a reduce-scatter, allgather(v), bcast or reduce step through the segment (`members` of them, elements
// of `unit_bytes`) is cheaper single copy than copy-in, as the model costs both: from hier-tune's
// shm.single_ns_per_byte (none measured: never) and the round costs (docs/shm.md). Under
// HIER_SHM_CMA=auto the plan chooses what this says (shm_single); shm_cost costs the step's choice.
bool shm_single_cheaper(const sched::Step& st, int members, int64_t unit_bytes, const Model& m);

// The cost of one step alone, with `flows` flows on its level (exposed for the tests);
// with_reduce false: without the local reductions (communication only). Steps of quantized
// schedules (Schedule::quant_bits: `quant_bits`): Quantize / Dequantize / DequantizeReduce at
// Model::quant(quant_bits)'s rates per byte of values, steps on records (Step::bytes) in bytes,
// an Alltoallv as an alltoall of its largest piece.
double step_cost(const sched::Step& st, int rank, const topo::Shape& shape, const Model& m, int64_t unit_bytes,
                 int flows, bool with_reduce = true, int quant_bits = 8);

}  // namespace hier::model
