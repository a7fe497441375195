#include "model/cost.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <tuple>

#include "model/cost_device.hpp"
#include "sched/transport.hpp"
#include "shm/cma.hpp"
#include "shm/segment.hpp"

namespace hier::model {
namespace {

using sched::Kind;
using sched::On;

int64_t pof2_below(int64_t m) {
  int64_t p = 1;
  while (p * 2 <= m) p *= 2;
  return p;
}
int64_t pof2_above(int64_t m) {
  int64_t p = 1;
  while (p < m) p *= 2;
  return p;
}

// Rounds of a reduce-scatter by recursive halving (distance 1 first, each round half the data),
// with the reduction of what each round receives.
double halving(double n, int64_t m, const Net& net, double red) {
  const int64_t p = pof2_below(m);
  double t = 0, b = n / 2;
  for (int64_t d = 1; d < p; d *= 2, b /= 2) t += net.exchange(d, b) + b * red;
  return t;
}
double doubling_gather(double n, int64_t m, const Net& net) {
  const int64_t p = pof2_below(m);
  double t = 0, b = n / p;
  for (int64_t d = p / 2; d >= 1; d /= 2, b *= 2) t += net.exchange(d, b);
  return t;
}
// Non-power-of-two member counts: the extra members fold into the others before and after.
double fold(double n, int64_t m, const Net& net, double red) {
  return m == pof2_below(m) ? 0 : 2 * net.shift(1, n) + n * red;
}
double binomial_tree(double n, int64_t m, const Net& net, double red) {
  double t = 0;
  for (int64_t d = pof2_above(m) / 2; d >= 1; d /= 2) t += net.tree(d, n) + n * red;
  return t;
}
double binomial_scatter(double n, int64_t m, const Net& net) {
  const int64_t p = pof2_above(m);
  double t = 0;
  for (int64_t d = p / 2; d >= 1; d /= 2) t += net.tree(d, n * static_cast<double>(d) / p);
  return t;
}

}  // namespace

double eager_bcast(Algo a, double n, int members, const Net& net, const Model& m) {
  if (a != Algo::Binomial || m.eager_bytes <= 0 || n > static_cast<double>(m.eager_bytes) || members <= 1) return -1;
  // Each round of the tree: the transfer of its messages, without the time of an empty one (the
  // wake-up a receiver that waits would pay).
  double t = 0;
  for (int64_t d = pof2_above(members) / 2; d >= 1; d /= 2) t += std::max(0.0, net.tree(d, n) - net.tree(d, 0));
  return t;
}

// The table's Op column (config/collectives.def).
Op op_of(config::Coll c) {
  static constexpr Op kOps[] = {
#define HIER_COLL(name, key, b, nb, p, pipelined, quantized, flat, op, ...) Op::op,
#include "config/collectives.def"
  };
  static_assert(std::size(kOps) == static_cast<size_t>(config::Coll::Count));
  return kOps[static_cast<size_t>(c)];
}

double FlatNet::round(int inside, int crossing, double bytes) const {
  double t = 0;
  if (inside > 0) t = m_.intra.message_ns(bytes, inside);
  if (crossing > 0) t = std::max(t, m_.inter.message_ns(bytes, crossing));
  return t;
}

// Node 0's ranks are 0..ppn-1; by symmetry every node sees the same.
double FlatNet::shift(int64_t d, double bytes) const {
  const int64_t p = static_cast<int64_t>(nodes_) * ppn_;
  int in = 0, out = 0;
  for (int r = 0; r < ppn_; ++r) {
    const int64_t to = (r + d) % p;
    if (to == r) continue;
    (to / ppn_ == 0 ? in : out)++;
  }
  return round(in, out, bytes);
}
double FlatNet::exchange(int64_t d, double bytes) const {
  const int64_t p = static_cast<int64_t>(nodes_) * ppn_;
  int in = 0, out = 0;
  for (int r = 0; r < ppn_; ++r) {
    const int64_t to = r ^ d;
    if (to >= p || to == r) continue;
    (to / ppn_ == 0 ? in : out)++;
  }
  return round(in, out, bytes);
}
double FlatNet::tree(int64_t d, double bytes) const {
  const int64_t p = static_cast<int64_t>(nodes_) * ppn_;
  int in = 0, out = 0;
  for (int r = 0; r < ppn_; ++r) {
    if (r % (2 * d) != 0 || r + d >= p) continue;
    ((r + d) / ppn_ == 0 ? in : out)++;
  }
  return round(in, out, bytes);
}

double algo_cost(Op op, Algo a, double n, int members, const Net& net, double red) {
  const int64_t m = members;
  if (m <= 1) return 0;
  const double piece = n / m;
  double t = 0;
  switch (op) {
    case Op::Allreduce:
      if (a == Algo::RecursiveDoubling) {
        t = fold(n, m, net, red);
        for (int64_t d = 1; d < pof2_below(m); d *= 2) t += net.exchange(d, n) + n * red;
        return t;
      }
      if (a == Algo::Rabenseifner) return fold(n, m, net, red) + halving(n, m, net, red) + doubling_gather(n, m, net);
      if (a == Algo::Binomial) return binomial_tree(n, m, net, red) + binomial_tree(n, m, net, 0);
      // ring: reduce-scatter then allgather around the ring
      return (m - 1) * (2 * net.shift(1, piece) + piece * red);
    case Op::ReduceScatter:
      if (a == Algo::RecursiveHalving || a == Algo::Rabenseifner) return fold(n, m, net, red) + halving(n, m, net, red);
      if (a == Algo::Pairwise) {
        for (int64_t i = 1; i < m; ++i) t += net.shift(i, piece) + piece * red;
        return t;
      }
      return (m - 1) * (net.shift(1, piece) + piece * red);
    case Op::Allgather:
      if (a == Algo::RecursiveDoubling) {
        for (int64_t d = 1; d < pof2_below(m); d *= 2) t += net.exchange(d, piece * d);
        return t + (m == pof2_below(m) ? 0 : net.shift(1, n));
      }
      if (a == Algo::Bruck) {
        for (int64_t d = 1; d < m; d *= 2) t += net.shift(d, piece * std::min(d, m - d));
        return t;
      }
      return (m - 1) * net.shift(1, piece);
    case Op::Bcast:
      if (a == Algo::ScatterAllgather) return binomial_scatter(n, m, net) + (m - 1) * net.shift(1, piece);
      if (a == Algo::RecursiveDoubling) {
        // MPICH's medium bcast: the binomial scatter, then a recursive-doubling allgather of the
        // pieces (log2 rounds instead of the ring's m - 1).
        t = binomial_scatter(n, m, net);
        for (int64_t d = 1; d < pof2_below(m); d *= 2) t += net.exchange(d, piece * d);
        return t + (m == pof2_below(m) ? 0 : net.shift(1, n));
      }
      if (a == Algo::Linear) {
        for (int64_t d = 1; d < m; ++d) t += net.tree(d, n);
        return t;
      }
      return binomial_tree(n, m, net, 0);
    case Op::Reduce:
      if (a == Algo::Rabenseifner) return fold(n, m, net, red) + halving(n, m, net, red) + binomial_scatter(n, m, net);
      if (a == Algo::Linear) {
        for (int64_t d = 1; d < m; ++d) t += net.tree(d, n) + n * red;
        return t;
      }
      return binomial_tree(n, m, net, red);
    case Op::Barrier:
      for (int64_t d = 1; d < m; d *= 2) t += net.shift(d, 0);
      return t;
    case Op::Alltoall:
      if (a == Algo::Bruck) {
        for (int64_t d = 1; d < m; d *= 2) t += net.shift(d, n / 2);
        return t;
      }
      if (a == Algo::Linear) {
        // Every exchange posted at once (Open MPI's linear alltoall, MPICH's scattered one):
        // the latencies overlap (the slowest once), the bytes of all exchanges one after another.
        double slowest = 0;
        for (int64_t i = 1; i < m; ++i) {
          const double one = net.shift(i, piece);
          slowest = std::max(slowest, one);
          t += one - net.shift(i, 0);
        }
        return slowest + t;
      }
      for (int64_t i = 1; i < m; ++i) t += net.shift(i, piece);
      return t;
    case Op::Scatter:
    case Op::Gather:
      if (a == Algo::Linear) {
        for (int64_t d = 1; d < m; ++d) t += net.tree(d, piece);
        return t;
      }
      return binomial_scatter(n, m, net);
  }
  return t;
}

double flat_algo_cost(config::Coll coll, int64_t bytes, int nodes, int ppn, const Model& m) {
  const FlatNet net(m, nodes, ppn);
  const Algo a = m.flat_algorithm(coll, bytes);
  if (op_of(coll) == Op::Bcast)
    if (const double e = eager_bcast(a, static_cast<double>(bytes), nodes * ppn, net, m); e >= 0) return e;
  return algo_cost(op_of(coll), a, static_cast<double>(bytes), nodes * ppn, net, m.reduce_ns_per_byte);
}

bool measured_shape(const topo::Shape& s, const Model& m) {
  if (!s.cartesian || s.one_machine || s.nnodes != m.nodes) return false;
  for (int n : s.node_sizes)
    if (n != m.ranks_per_node) return false;
  return true;
}

double measured_cost(const std::vector<Point>& pts, double b, double model, const std::function<double(double)>& model_at) {
  if (pts.empty() || b <= 0) return model;
  // Outside the measured range: the model's cost, scaled to agree with the nearest point.
  auto scaled = [&](const Point& p) {
    const double at = model_at(p.bytes);
    return at > 0 ? model * p.ns / at : p.ns;
  };
  if (b <= pts.front().bytes) return b == pts.front().bytes ? pts.front().ns : scaled(pts.front());
  if (b >= pts.back().bytes) return b == pts.back().bytes ? pts.back().ns : scaled(pts.back());
  for (size_t i = 1; i < pts.size(); ++i) {
    if (b > pts[i].bytes) continue;
    const Point &lo = pts[i - 1], &hi = pts[i];
    if (lo.ns <= 0 || hi.ns <= 0) return lo.ns + (hi.ns - lo.ns) * (b - lo.bytes) / (hi.bytes - lo.bytes);
    const double t = std::log(b / lo.bytes) / std::log(hi.bytes / lo.bytes);
    return std::exp(std::log(lo.ns) + t * std::log(hi.ns / lo.ns));
  }
  return model;
}

double flat_cost(config::Coll coll, int64_t bytes, const topo::Shape& s, const Model& m, bool nonblocking) {
  int nodes = std::max(s.nnodes, 1), ppn = 1;
  for (int n : s.node_sizes) ppn = std::max(ppn, n);
  if (s.one_machine || nodes == 1) {
    nodes = 1;
    ppn = s.size;
  }
  const double model = flat_algo_cost(coll, bytes, nodes, ppn, m);
  if (!measured_shape(s, m)) return model;
  const size_t c = static_cast<size_t>(coll);
  const std::vector<Point>& pts = nonblocking && !m.flat_measured_nb[c].empty() ? m.flat_measured_nb[c] : m.flat_measured[c];
  return measured_cost(pts, static_cast<double>(bytes), model, [&](double b) {
    return flat_algo_cost(coll, static_cast<int64_t>(b), nodes, ppn, m);
  });
}

namespace {

topo::Shape::Comm comm_kind(On on) {
  switch (on) {
    case On::Node: return topo::Shape::Comm::Node;
    case On::Cross: return topo::Shape::Comm::Cross;
    case On::Leaders: return topo::Shape::Comm::Leaders;
    default: return topo::Shape::Comm::Step;
  }
}

LevelKind level_of(const sched::CommRef& c, const topo::Shape& s) {
  if (s.one_machine) return LevelKind::Intra;
  switch (c.on) {
    case On::Node: return LevelKind::Intra;
    case On::Step: return c.level + 1 < s.nlevels() ? LevelKind::Intra : LevelKind::Inter;
    default: return LevelKind::Inter;
  }
}

// Members of a level communicator of `rank`: from the dimensions where the shape is cartesian
// (cheap on 75,000 ranks), else from the shape's one definition of the communicators.
int member_count(const sched::CommRef& c, int rank, const topo::Shape& s) {
  if (s.cartesian) {
    switch (c.on) {
      case On::Step:
        if (c.level < s.nlevels()) return s.dims[static_cast<size_t>(c.level)];
        break;
      case On::Node: return s.node_sizes[static_cast<size_t>(s.node_of[static_cast<size_t>(rank)])];
      case On::Cross:
      case On::Leaders: return s.nnodes;
      default: break;
    }
  }
  return static_cast<int>(s.members(rank, comm_kind(c.on), c.level).size());
}

// The level whose measured steps (LevelParams::steps, "Measured level steps" in docs/model.md)
// may cost a step on `c`: the communicators hier-tune measures are a node's (On::Node, or level 0
// of a two-level shape) and a node position's across the nodes (On::Cross, or the outermost
// level); null for the others (the leaders, a level inside a node of a deeper shape, one machine).
const LevelParams* measured_level(const sched::CommRef& c, const topo::Shape& s, const Model& m) {
  if (s.one_machine) return nullptr;
  switch (c.on) {
    case On::Node: return &m.intra;
    case On::Cross: return &m.inter;
    case On::Step:
      if (c.level == s.nlevels() - 1) return &m.inter;
      return c.level == 0 && s.nlevels() == 2 ? &m.intra : nullptr;
    default: return nullptr;
  }
}

// The measured time of `coll` on a level's communicators at `bytes`: piecewise linear between
// the points, above the last the last segment's slope (never negative); below the first point
// (or without points) -1: the rounds model applies.
double measured_step_ns(const LevelParams& lp, config::Coll coll, double bytes) {
  const std::vector<Point>& pts = lp.steps[static_cast<size_t>(coll)];
  if (pts.size() < 2 || bytes < pts.front().bytes) return -1;
  for (size_t i = 1; i < pts.size(); ++i) {
    if (bytes > pts[i].bytes) continue;
    const Point &lo = pts[i - 1], &hi = pts[i];
    return lo.ns + (hi.ns - lo.ns) * (bytes - lo.bytes) / (hi.bytes - lo.bytes);
  }
  const Point &lo = pts[pts.size() - 2], &hi = pts.back();
  const double slope = std::max(0.0, (hi.ns - lo.ns) / (hi.bytes - lo.bytes));
  return hi.ns + slope * (bytes - hi.bytes);
}

// MPI_Scatterv / MPI_Gatherv as both MPIs run them: linearly, the root exchanging each member's
// piece with it (one flow at a time: only the root sends or receives). Sequential (Open MPI's
// blocking sends): a message after another, each paying its latency (on an oversubscribed node
// the member's wake-up); else all posted at once: one latency, the pieces one after another.
double linear_v(const sched::Step& st, int members, const LevelParams& lp, bool sequential, int64_t ub) {
  double t = 0, bytes = 0;
  for (size_t i = 0; i < st.counts.size() && static_cast<int>(i) < members; ++i) {
    if (static_cast<int>(i) == st.root) continue;
    const double b = static_cast<double>(st.counts[i] * ub);
    if (sequential) t += lp.message_ns(b, 1);
    bytes += b;
  }
  if (sequential) return t;
  return bytes > 0 ? lp.message_ns(bytes, 1) : 0;
}

namespace {
// The rates of a step through the segment: copies, folds (0 without a reduction), and single
// copy's kernel read (< 0: none measured; the steps then stay copy-in).
struct ShmCost {
  double p, c, r, sc, n = 0, all = 0, most = 0;
  ShmCost(const sched::Step& st, int members, int64_t ub, const Model& m, bool with_reduce)
      : p(members),
        c(m.shm.copy_ns_per_byte >= 0 ? m.shm.copy_ns_per_byte : m.copy_ns_per_byte),
        r(!with_reduce ? 0.0 : m.shm.reduce_ns_per_byte >= 0 ? m.shm.reduce_ns_per_byte : m.reduce_ns_per_byte),
        sc(m.shm.single_ns_per_byte), n(static_cast<double>(st.count * ub)) {
    for (int64_t x : st.counts) all += static_cast<double>(x * ub), most = std::max(most, static_cast<double>(x * ub));
  }
  // Single copy (exec/shm_steps.cpp): my piece of every peer's buffer read through the kernel
  // and folded (reduce-scatter), or every peer's piece read (allgather); the root's buffer read
  // (bcast); my piece of every member's buffer read and folded, and written to the root's
  // (reduce: a write through the kernel costed as a read); one round to publish the buffers and
  // one to hand them back. < 0 where it does not apply.
  double single(Kind k, double round_ns) const {
    const bool rooted = k == Kind::Bcast || k == Kind::Reduce;
    if (sc < 0 || (k != Kind::ReduceScatter && k != Kind::Allgather && k != Kind::Allgatherv && !rooted)) return -1;
    const double gathered = k == Kind::Allgather ? n * p : rooted ? n : all;
    if (!shm::single_copy_pays(static_cast<int64_t>(gathered))) return -1;
    const double others = gathered / p * (p - 1);
    if (k == Kind::Bcast) return n * sc + 2 * round_ns;
    if (k == Kind::Reduce) return others * (sc + r) + n / p * sc + 2 * round_ns;
    if (k == Kind::ReduceScatter) return all / p * c + others * (sc + r) + 2 * round_ns;
    return gathered / p * c + others * sc + 2 * round_ns;
  }
  // Copy-in: copies in and out, folds, one flag synchronization per round of a slot's half.
  double copyin(Kind k, double round_ns) const {
    const double half = static_cast<double>(shm::kHalfBytes);
    auto rounds = [&](double per_round_bytes) { return std::max(1.0, std::ceil(per_round_bytes / half)); };
    switch (k) {
      case Kind::ReduceScatter:  // the others' pieces in, my piece folded from every slot
        return all * c + all / p * (p - 1) * r + rounds(all) * round_ns;
      case Kind::Allgather: return n * p * c + rounds(n) * round_ns;
      case Kind::Allgatherv: return all * c + rounds(most) * round_ns;
      case Kind::Bcast: return n * c + rounds(n) * round_ns;
      case Kind::Reduce: return n * c + n * (p - 1) * r + rounds(n) * round_ns;
      case Kind::Allreduce: return 2 * n * c + n * (p - 1) * r + rounds(n) * round_ns;
      default: return round_ns;  // barrier
    }
  }
};
}  // namespace

// A level step through the shared segment (Via::Shm; exec/shm_steps.hpp), one member's time:
// the form the step carries (Step::single, the plan's choice: route_inside_nodes), single copy
// costed as copy-in where no single-copy rate was measured.
double shm_cost(const sched::Step& st, int members, int64_t ub, const Model& m, bool with_reduce) {
  const ShmCost k(st, members, ub, m, with_reduce);
  const double single = st.single ? k.single(st.kind, m.shm.round_ns) : -1;
  return single >= 0 ? single : k.copyin(st.kind, m.shm.round_ns);
}


bool is_local(Kind k) {
  return k == Kind::Copy || k == Kind::LoadBlock || k == Kind::StoreBlock || k == Kind::Quantize ||
         k == Kind::Dequantize || k == Kind::DequantizeReduce;
}

// Which steps of a node's ranks run at once: same wave, same stage, same kind of communicator.
using StepKey = std::tuple<int, int, uint8_t, int>;
StepKey key_of(const sched::Step& st, size_t index) {
  return {st.wave, st.stage >= 0 ? st.stage : static_cast<int>(index), static_cast<uint8_t>(st.comm.on), st.comm.level};
}

}  // namespace

bool shm_single_cheaper(const sched::Step& st, int members, int64_t ub, const Model& m) {
  const ShmCost k(st, members, ub, m, st.kind == Kind::ReduceScatter || st.kind == Kind::Reduce);
  const double single = k.single(st.kind, m.shm.round_ns);
  return single >= 0 && single < k.copyin(st.kind, m.shm.round_ns);
}

double step_cost(const sched::Step& st, int rank, const topo::Shape& s, const Model& m, int64_t ub, int flows,
                 bool with_reduce, int quant_bits) {
  // The quantization kernels, per byte of values (Model::quant): quantize per byte of input,
  // dequantize per byte of output, the fused dequantize + add per byte of the accumulator, once
  // per record summed. The rates are per byte of float: a 16-bit value is widened to float and
  // costs what a float does (not measured apart), so the kernels count at least 4 bytes a value.
  const QuantRates& qr = m.quant(quant_bits);
  const double values = static_cast<double>(st.count * ub);
  const double kernel = static_cast<double>(st.count * std::max<int64_t>(ub, 4));
  switch (st.kind) {
    case Kind::Quantize: return kernel * qr.quantize_ns_per_byte;
    case Kind::Dequantize: return kernel * qr.dequantize_ns_per_byte;
    case Kind::DequantizeReduce: return kernel * st.parts * qr.dequantize_add_ns_per_byte;
    default: break;
  }
  if (is_local(st.kind)) return values * m.copy_ns_per_byte;
  if (st.bytes) ub = 1;  // steps on records move bytes
  int members = static_cast<int>(st.counts.size());
  if (members == 0) members = member_count(st.comm, rank, s);
  if (st.via == sched::Via::Shm) return shm_cost(st, members, ub, m, with_reduce);
  const LevelParams& lp = m.level(level_of(st.comm, s));
  const LevelNet net(lp, flows);
  const double red = with_reduce ? m.reduce_ns_per_byte : 0.0;
  const double count = static_cast<double>(st.count * ub);
  using config::Coll;
  auto mpi = [&](Coll c, Op op, double bytes) {
    return algo_cost(op, m.flat_algorithm(c, static_cast<int64_t>(bytes)), bytes, members, net, red);
  };
  // The MPI's collective measured on this level's communicators (hier-tune: every communicator
  // of the level at once, so the flows are in the time), only where it was measured as this step
  // runs: the same member count and, across nodes, every node position at once (the file's
  // ranks per node); the reduction is in the time (with_reduce changes nothing). Else the
  // rounds of the MPI's algorithm.
  const LevelParams* ml = measured_level(st.comm, s, m);
  const bool measured_here =
      ml != nullptr && ml->step_members == members && (ml != &m.inter || flows == m.ranks_per_node);
  auto measured_or = [&](Coll as, double bytes, Coll c, Op op) {
    const double t = measured_here ? measured_step_ns(*ml, as, bytes) : -1;
    return t >= 0 ? t : mpi(c, op, bytes);
  };
  switch (st.kind) {
    case Kind::ReduceScatter: {
      const double in = static_cast<double>(counts_total(st.counts) * ub);
      // (libhier's own direct exchange, not the MPI's collective: the rounds model; the
      // executor's decision, sched::direct_reduce_scatter, on the thresholds the model's
      // schedules carry, which are the model's: build_for, build_quant)
      if (sched::direct_reduce_scatter(st, ub, m.direct_rs_from))
        return algo_cost(Op::ReduceScatter, Algo::Pairwise, in, members, net, red);
      return measured_or(Coll::ReduceScatterBlock, in, Coll::ReduceScatter, Op::ReduceScatter);
    }
    case Kind::Allreduce: return measured_or(Coll::Allreduce, count, Coll::Allreduce, Op::Allreduce);
    case Kind::Allgather: return measured_or(Coll::Allgather, count * members, Coll::Allgather, Op::Allgather);
    case Kind::Allgatherv: {
      const double all = static_cast<double>(counts_total(st.counts) * ub);
      if (sched::padded_allgatherv(st, ub, m.padded_agv_from)) {
        const double most = static_cast<double>(*std::max_element(st.counts.begin(), st.counts.end()) * ub);
        return measured_or(Coll::Allgather, most * members, Coll::Allgather, Op::Allgather);
      }
      return measured_or(Coll::Allgather, all, Coll::Allgatherv, Op::Allgather);
    }
    case Kind::Bcast:
      if (const double e = eager_bcast(m.flat_algorithm(Coll::Bcast, static_cast<int64_t>(count)), count, members, net, m);
          e >= 0)
        return e;
      return measured_or(Coll::Bcast, count, Coll::Bcast, Op::Bcast);
    case Kind::Reduce: return mpi(Coll::Reduce, Op::Reduce, count);
    case Kind::Scatterv:
    case Kind::Gatherv: return linear_v(st, members, lp, m.scatterv_sequential, ub);
    case Kind::Alltoall: return mpi(Coll::Alltoall, Op::Alltoall, count * members);
    case Kind::Alltoallv: {
      // As an alltoall of the largest piece sent or received (the slowest pair sets the pace).
      int64_t most = 0;
      for (int64_t x : st.counts) most = std::max(most, x);
      for (int64_t x : st.rcounts) most = std::max(most, x);
      return mpi(Coll::Alltoall, Op::Alltoall, static_cast<double>(most * ub) * members);
    }
    case Kind::Barrier: return mpi(Coll::Barrier, Op::Barrier, 0);
    case Kind::Send:
    case Kind::Recv: return net.shift(1, count);
    default: break;
  }
  return 0;
}

double cost(const std::vector<sched::Schedule>& node, int rank, const topo::Shape& s, const Model& m, int64_t ub) {
  if (node.empty()) return 0;
  const sched::Schedule& mine = node[0];
  int ppn = 1;
  for (int n : s.node_sizes) ppn = std::max(ppn, n);
  // Flows of each step: how many of the node's ranks run it at once.
  std::map<StepKey, int> runners;
  if (node.size() > 1) {
    for (const sched::Schedule& sc : node) {
      std::map<StepKey, int> seen;
      for (size_t i = 0; i < sc.steps.size(); ++i)
        if (!is_local(sc.steps[i].kind)) seen[key_of(sc.steps[i], i)] = 1;
      for (const auto& [k, v] : seen) runners[k] += v;
    }
  }
  auto flows_of = [&](const sched::Step& st, size_t i) {
    if (node.size() > 1) return std::max(1, runners[key_of(st, i)]);
    return st.comm.on == On::Leaders ? 1 : ppn;
  };
  double t = 0;
  const size_t n = mine.steps.size();
  for (size_t i = 0; i < n;) {
    const size_t j = sched::group_end(mine, i);
    // The CPU's work (local copies, reductions) runs one piece after another; communication on
    // one level too (a step through the segment included), while the two levels overlap
    // (Model::overlap).
    double cpu = 0, level[2] = {0, 0};
    for (size_t k = i; k < j; ++k) {
      const sched::Step& st = mine.steps[k];
      if (is_local(st.kind)) {
        cpu += step_cost(st, rank, s, m, ub, 1, true, mine.quant_bits) + device_local_ns(m);
        continue;
      }
      const int flows = flows_of(st, k);
      const double all = step_cost(st, rank, s, m, ub, flows, true, mine.quant_bits);
      // A step through the segment is its level's whole work, folds included: its copies and
      // folds alternate round by round, and the wave's messages on the other level progress
      // between its rounds (exec::Machine::complete_group), so all of it overlaps them.
      const double comm =
          st.via == sched::Via::Shm ? all : step_cost(st, rank, s, m, ub, flows, false, mine.quant_bits);
      cpu += all - comm;
      // Device-bound (Model::placement): the wait for the module's stream, staged copies.
      const int members = st.counts.empty() ? member_count(st.comm, rank, s) : static_cast<int>(st.counts.size());
      level[level_of(st.comm, s) == LevelKind::Intra ? 0 : 1] +=
          comm + m.step_overhead_ns + device_message_ns(st, members, ub, m);
    }
    const double most = std::max(level[0], level[1]), sum = level[0] + level[1];
    t += cpu + most + (1.0 - m.overlap) * (sum - most);
    i = j;
  }
  return t;
}

bool shm_single(const sched::Step& st, int members, int64_t ub, const Model& m, config::ShmCma cma) {
  if (cma == config::ShmCma::Off) return false;
  int64_t units = 0;
  switch (st.kind) {
    case Kind::ReduceScatter:
    case Kind::Allgatherv:
      for (int64_t x : st.counts) units += x;
      break;
    case Kind::Allgather: units = st.count * members; break;
    case Kind::Bcast:
    case Kind::Reduce: units = st.count; break;
    default: return false;  // allreduce, barrier: copy-in only
  }
  if (!shm::single_copy_pays(units * ub)) return false;
  return cma == config::ShmCma::On || shm_single_cheaper(st, members, ub, m);
}

void route_inside_nodes(sched::Schedule& s, const topo::Shape& shape, int rank, const Model& m, int64_t ub,
                        config::ShmCma cma) {
  sched::route_shm(s, shape, [&](const sched::CommRef& c) { return member_count(c, rank, shape) >= 2; });
  for (sched::Step& st : s.steps) {
    if (st.via != sched::Via::Shm) continue;
    const int members = st.counts.empty() ? member_count(st.comm, rank, shape) : static_cast<int>(st.counts.size());
    st.single = shm_single(st, members, st.bytes || s.unit == sched::Unit::Bytes ? 1 : ub, m, cma);
  }
}

}  // namespace hier::model
