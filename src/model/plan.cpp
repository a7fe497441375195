#include "model/plan.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <vector>

#include "model/cost.hpp"
#include "model/cost_device.hpp"
#include "model/cost_quant.hpp"
#include "model/shapes.hpp"
#include "sched/pipeline.hpp"

namespace hier::model {
namespace {

using config::Coll;
using sched::Algorithm;

// The table's Cartesian and AnyShape columns (config/collectives.def).
std::vector<Algorithm> candidates(Coll c, const topo::Shape& s) {
#define HIER_ALGOS(...) __VA_ARGS__
  using enum Algorithm;
  static const std::vector<Algorithm> kCartesian[] = {
#define HIER_COLL(name, key, b, nb, p, pipelined, quantized, flat, op, cartesian, any, ...) {HIER_ALGOS cartesian},
#include "config/collectives.def"
  };
  static const std::vector<Algorithm> kAny[] = {
#define HIER_COLL(name, key, b, nb, p, pipelined, quantized, flat, op, cartesian, any, ...) {HIER_ALGOS any},
#include "config/collectives.def"
  };
#undef HIER_ALGOS
  static_assert(std::size(kCartesian) == static_cast<size_t>(Coll::Count));
  return (s.cartesian ? kCartesian : kAny)[static_cast<size_t>(c)];
}

// The schedule of `rank` for the call in `chunks` chunks (the rooted ones rooted at rank 0): the
// row's Builder column (config/collectives.def, sched::even_*), pipelined where chunks > 1 (the
// Pipelined column; sched::pipeline leaves 1 chunk unchanged).
sched::Schedule build_one(const Call& call, const topo::Shape& s, int rank, Algorithm a, int chunks) {
  static constexpr sched::EvenBuilder kBuilders[] = {
#define HIER_COLL(name, key, b, nb, p, pipelined, quantized, flat, op, cartesian, any, buffers, builder, ...) \
  &sched::builder,
#include "config/collectives.def"
  };
  static_assert(std::size(kBuilders) == static_cast<size_t>(Coll::Count));
  const auto c = static_cast<size_t>(call.coll);
  if (c >= std::size(kBuilders)) return {};
  const int64_t es = std::max<int64_t>(call.elem_size, 1);
  const int cut = config::pipelined(call.coll) ? chunks : 1;
  return sched::pipeline(call.bytes / es, cut, [&](int64_t n) { return kBuilders[c](s, rank, n, es, a); });
}

}  // namespace

sched::Schedule build_for(const Call& call, const topo::Shape& s, int rank, Algorithm a, int chunks, const Model& m) {
  sched::Schedule sc = build_one(call, s, rank, a, chunks);
  sc.direct_rs_from = m.direct_rs_from;
  sc.padded_agv_from = m.padded_agv_from;
  return sc;
}

namespace {

std::vector<int> chunk_options(const Call& call, const Model& m, const config::Config& cfg) {
  if (!config::pipelined(call.coll)) return {1};
  const int64_t units = call.bytes / std::max<int64_t>(call.elem_size, 1);
  if (cfg.chunk_bytes >= 0) return {sched::chunk_count(units, call.bytes, cfg.chunk_bytes)};
  std::vector<int> out{1};
  for (int64_t c : m.chunk_bytes[static_cast<size_t>(call.coll)]) {
    const int n = sched::chunk_count(units, call.bytes, c);
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

// The cheapest of libhier's candidate schedules for the call by the IR's cost (and which).
double cheapest(const Call& call, const topo::Shape& s, const Model& m, const config::Config& cfg,
                const std::vector<Algorithm>& cands, Algorithm* best_a, int* best_c, bool* best_shm);

}  // namespace

double hier_cost(const Call& call, const topo::Shape& s, const Model& m, Algorithm a, int chunks, bool shm,
                 config::ShmCma cma) {
  std::vector<sched::Schedule> node;
  const int64_t e = std::max<int64_t>(call.elem_size, 1);
  for (int r = 0; r < s.size; ++r)
    if (s.node_of[r] == s.node_of[0]) {
      node.push_back(build_for(call, s, r, a, chunks, m));
      if (shm) route_inside_nodes(node.back(), s, r, m, e, cma);
    }
  const int64_t ub = node[0].unit == sched::Unit::Bytes ? 1 : e;
  return cost(node, 0, s, m, ub);
}

std::string describe(const Plan& p) {
  char buf[384];
  if (p.algo == Algorithm::Flat) {
    if (p.flat_ns > 0)
      std::snprintf(buf, sizeof buf, "flat: predicted %.3f ms vs hier %.3f ms (%s)", p.flat_ns / 1e6, p.hier_ns / 1e6, p.why);
    else
      std::snprintf(buf, sizeof buf, "flat (%s)", p.why);
  } else {
    std::snprintf(buf, sizeof buf, "hier %s, %d chunk%s: predicted %.3f ms vs flat %.3f ms (%s)", sched::to_string(p.algo),
                  p.chunks, p.chunks == 1 ? "" : "s", p.hier_ns / 1e6, p.flat_ns / 1e6, p.why);
  }
  if (p.quant_ns > 0) {
    const size_t n = std::strlen(buf);
    if (p.quant_chunks > 1)
      std::snprintf(buf + n, sizeof buf - n, "; quantized, %d chunks, predicted %.3f ms (%s)", p.quant_chunks,
                    p.quant_ns / 1e6, p.quant_why);
    else
      std::snprintf(buf + n, sizeof buf - n, "; quantized predicted %.3f ms (%s)", p.quant_ns / 1e6, p.quant_why);
  } else if (*p.quant_why) {
    const size_t n = std::strlen(buf);
    std::snprintf(buf + n, sizeof buf - n, "; quantization: %s", p.quant_why);
  }
  return buf;
}

namespace {
double cheapest(const Call& call, const topo::Shape& s, const Model& m, const config::Config& cfg,
                const std::vector<Algorithm>& cands, Algorithm* best_a, int* best_c, bool* best_shm) {
  double best = -1;
  for (bool shm : shm_options(cfg))
    for (Algorithm a : cands)
      for (int c : chunk_options(call, m, cfg)) {
        const double t = hier_cost(call, s, m, a, c, shm, cfg.shm_cma);
        if (best < 0 || t < best) {
          best = t;
          if (best_a) *best_a = a;
          if (best_c) *best_c = c;
          if (best_shm) *best_shm = shm;
        }
      }
  return best;
}
}  // namespace

std::vector<bool> shm_options(const config::Config& cfg) {
  switch (cfg.shm) {
    case config::ShmMode::Off: return {false};
    case config::ShmMode::On: return {true};
    default: return {false, true};
  }
}

Plan plan(const Call& call, const topo::Shape& s, const Model& m, const config::Config& cfg) {
  // A device-bound communicator's calls: costed with the device's rates (model/cost_device.hpp).
  if (call.where != m.placement) return plan(call, s, on_device(m, call.where), cfg);
  Plan p;
  p.direct_rs_from = m.direct_rs_from;
  p.padded_agv_from = m.padded_agv_from;
  const config::Algo forced = cfg.algo_for(call.coll);
  if (forced == config::Algo::Flat) return p.why = "HIER_ALGO=flat", p;
  if (!s.hierarchical()) return p.why = "no hierarchy on this communicator", p;
  // Level collectives take int counts; the largest piece is at most the whole message.
  if (call.bytes > std::numeric_limits<int>::max()) return p.why = "message above 2 GiB", p;
  const std::vector<Algorithm> cands = candidates(call.coll, s);
  if (cands.empty()) return p.why = "shape not cartesian (uneven ranks per level)", p;
  // Measured (bench/RESULTS.md): with every rank on one machine the extra steps cost more than
  // the levels save; the hierarchy pays where its outer level crosses a network.
  if (s.one_machine && forced != config::Algo::Hier) return p.why = "all ranks share memory (levels are node:N fakes)", p;
  Algorithm best_a = cands[0];
  int best_c = 1;
  bool best_shm = false;
  double best = cheapest(call, s, m, cfg, cands, &best_a, &best_c, &best_shm);
  // On the shape the tune file measured libhier's schedules on (hier_measured), the prediction
  // is that measurement; the IR's costs chose the candidate (and scale between the sizes).
  // hier-tune measured them with the chunks the model chooses (HIER_CHUNK=auto): a forced
  // chunk size runs other schedules, predicted by the IR alone. A nonblocking call: libhier's
  // nonblocking schedules as hier-tune timed them (start, then MPI_Wait at once) where it did.
  const size_t ci = static_cast<size_t>(call.coll);
  const bool nb_hier = call.nonblocking && !m.hier_measured_nb[ci].empty();
  if (measured_shape(s, m) && cfg.chunk_bytes < 0)
    best = measured_cost(nb_hier ? m.hier_measured_nb[ci] : m.hier_measured[ci], static_cast<double>(call.bytes), best,
                         [&](double b) {
                           Call at = call;
                           at.bytes = static_cast<int64_t>(b);
                           return cheapest(at, s, m, cfg, cands, nullptr, nullptr, nullptr);
                         });
  p.hier_ns = best;
  p.shm = best_shm;
  // The MPI's own call: its nonblocking one for a nonblocking call, where measured.
  p.flat_ns = flat_cost(call.coll, call.bytes, s, m, call.nonblocking) + device_flat_ns(call.coll, call.bytes, s.size, m);
  // A nonblocking call is hierarchical where hier-tune timed both nonblocking calls on this
  // shape and libhier's was faster. Without those figures only the allreduce's rs-ar-ag schedule
  // is priced as its blocking one: its cross-node step is a reduce-scatter + allgather for a
  // nonblocking call too (exec/coll_reductions.cpp), and so it measured 1.02x / 1.17x / 0.96x the
  // MPI's own call bare and 1.63x / 1.71x / 1.19x overlapped on 2 x 2 / 2 x 4 / 4 x 2 (16 MiB,
  // Open MPI; bench/RESULTS.md, "Nonblocking allreduce: the cross-node step"). The other
  // collectives' nonblocking schedules were not measured against the MPI's: its own call.
  const bool nb_measured = nb_hier && !m.flat_measured_nb[ci].empty() && measured_shape(s, m);
  const bool nb_priced = call.coll == Coll::Allreduce && best_a == Algorithm::RsArAg;
  if (forced == config::Algo::Hier) {
    p.algo = best_a, p.chunks = best_c, p.why = "HIER_ALGO=hier";
  } else if (call.nonblocking && !nb_measured && !nb_priced) {
    p.why = "nonblocking call not measured on this shape (hier-tune): the MPI's own";
  } else if (best < p.flat_ns * (1.0 - m.margin)) {
    p.algo = best_a, p.chunks = best_c, p.why = "cheaper by the model";
  } else {
    p.why = "flat cheaper by the model";
  }
  // Open MPI's libnbc runs an in-place (or fewer than 4 ranks) MPI_Iallreduce as a binomial
  // reduce then bcast, each half of the links idle in turn: libhier's schedule measured 1.75x
  // (2 x 2) and 2.1x (4 x 2) the MPI's own call with it, at parity with the split (bench/RESULTS.md,
  // "Nonblocking allreduce: the cross-node step").
  p.split_top = call.nonblocking && call.coll == Coll::Allreduce && p.algo == Algorithm::RsArAg;
  weigh_quant(call, s, m, cfg, p);  // HIER_QUANT: the quantized schedule against the exact plan
  return p;
}

int64_t hier_from(const Model& m, Coll coll, const config::Config* settings) {
  std::vector<topo::Shape> probes;
  if (m.nodes > 1 && m.ranks_per_node > 1) probes.push_back(two_level(m.nodes, m.ranks_per_node));
  for (auto [n, r] : {std::pair{2, 2}, {2, 4}, {4, 2}, {4, 4}})
    if (n != m.nodes || r != m.ranks_per_node) probes.push_back(two_level(n, r));
  config::Config cfg;  // auto everywhere, the model's chunks
  if (settings) cfg.shm = settings->shm, cfg.quant = settings->quant, cfg.quant_block = settings->quant_block;
  const bool reduction = coll == Coll::Allreduce || coll == Coll::Reduce || coll == Coll::ReduceScatter ||
                         coll == Coll::ReduceScatterBlock;
  // Element sizes probed: a reduction's float32; with HIER_QUANT also float64 (its quantized
  // schedule is costed per value: fewer bytes per value across the link, a higher floor) and,
  // for the allgather, whose exact schedule runs in bytes, both.
  std::vector<int64_t> sizes{reduction ? 4 : 1};
  if (settings && (reduction || coll == Coll::Allgather)) sizes = {4, 8};
  const int64_t last = coll == Coll::Barrier ? 0 : int64_t{1} << 30;
  for (int64_t b = coll == Coll::Barrier ? 0 : 64; b <= last; b *= 4) {
    for (const topo::Shape& s : probes)
      for (int64_t e : sizes)
        if (const Plan p = plan({coll, b, e}, s, m, cfg); p.algo != Algorithm::Flat || p.quant_bits) return b / 4;
    if (b == 0) break;
  }
  return std::numeric_limits<int64_t>::max();
}

std::array<int64_t, kColls> hier_from(const Model& m, const config::Config& settings) {
  std::array<int64_t, kColls> from{};
  for (size_t c = 0; c < kColls; ++c) from[c] = hier_from(m, static_cast<Coll>(c), &settings);
  return from;
}

bool worth_building(const Call& call, int64_t from, const config::Config& cfg) {
  const config::Algo forced = cfg.algo_for(call.coll);
  if (forced == config::Algo::Flat) return false;
  if (forced == config::Algo::Hier) return true;
  return call.bytes >= from;
}

}  // namespace hier::model
