#include "model/model.hpp"

#include <algorithm>
#include <array>

namespace hier::model {

namespace {
constexpr std::array<const char*, static_cast<size_t>(Algo::Count)> kAlgoNames = {
    "ring", "recursive_doubling", "rabenseifner", "recursive_halving", "binomial", "scatter_allgather",
    "bruck", "pairwise", "dissemination", "linear"};
}  // namespace

const char* to_string(Family f) { return f == Family::OpenMPI ? "openmpi" : "mpich"; }

const char* to_string(Algo a) {
  return a < Algo::Count ? kAlgoNames[static_cast<size_t>(a)] : "?";
}

bool algo_from_string(const std::string& s, Algo& a) {
  for (size_t i = 0; i < kAlgoNames.size(); ++i)
    if (s == kAlgoNames[i]) {
      a = static_cast<Algo>(i);
      return true;
    }
  return false;
}

double LevelParams::per_flow_ns_per_byte(int flows) const {
  if (concurrent.empty()) return ns_per_byte;
  flows = std::max(flows, 1);
  FlowPoint prev{1, ns_per_byte};  // one flow alone, unless the first point says otherwise
  for (const FlowPoint& p : concurrent) {
    if (flows <= p.flows) {
      if (p.flows <= prev.flows) return p.ns_per_byte;
      const double t = static_cast<double>(flows - prev.flows) / (p.flows - prev.flows);
      return prev.ns_per_byte + t * (p.ns_per_byte - prev.ns_per_byte);
    }
    prev = p;
  }
  // Above the last point: the level is saturated, its aggregate rate shared by every flow.
  const FlowPoint& last = concurrent.back();
  return last.ns_per_byte * static_cast<double>(flows) / last.flows;
}

namespace {
// Time of one ladder field at `bytes`: piecewise linear, flat below the first point, the last
// segment's slope (never negative) above the last.
template <class F>
double ladder_at(const std::vector<LadderPoint>& l, double bytes, F field) {
  if (bytes <= l.front().bytes) return field(l.front());
  for (size_t i = 1; i < l.size(); ++i)
    if (bytes <= l[i].bytes) {
      const LadderPoint &lo = l[i - 1], &hi = l[i];
      return field(lo) + (field(hi) - field(lo)) * (bytes - lo.bytes) / (hi.bytes - lo.bytes);
    }
  const LadderPoint& last = l.back();
  if (l.size() < 2) return field(last);
  const LadderPoint& prev = l[l.size() - 2];
  const double slope = std::max(0.0, (field(last) - field(prev)) / (last.bytes - prev.bytes));
  return field(last) + slope * (bytes - last.bytes);
}
}  // namespace

double LevelParams::message_ns(double bytes, int flows) const {
  if (ladder.empty()) return latency_ns + bytes * per_flow_ns_per_byte(flows);
  flows = std::max(flows, 1);
  const double one = ladder_at(ladder, bytes, [](const LadderPoint& p) { return p.ns; });
  if (flows == 1 || ladder_flows <= 1) return one;
  const double all = ladder_at(ladder, bytes, [](const LadderPoint& p) { return p.ns_all; });
  if (flows <= ladder_flows) return one + (all - one) * (flows - 1) / (ladder_flows - 1);
  return all * static_cast<double>(flows) / ladder_flows;
}

Algo Model::flat_algorithm(config::Coll coll, int64_t bytes) const {
  for (const AlgoRule& r : flat_algorithms[static_cast<size_t>(coll)])
    if (bytes < r.below_bytes) return r.algo;
  // The table's FlatDefault column (config/collectives.def).
  static constexpr Algo kDefault[] = {
#define HIER_COLL(name, key, blocking, nonblocking, persistent, pipelined, quantized, flat, ...) Algo::flat,
#include "config/collectives.def"
  };
  static_assert(std::size(kDefault) == static_cast<size_t>(config::Coll::Count));
  return kDefault[static_cast<size_t>(coll)];
}

}  // namespace hier::model
