// Device-bound schedules' costs (model/cost_device.hpp).
#include "model/cost_device.hpp"

#include <algorithm>

#include "model/cost.hpp"

namespace hier::model {

namespace {

using sched::Kind;

// The bytes a staged message step copies device -> host before its PMPI call (in) and back
// after it (out), on this rank: the step's reads and writes as exec/device_stage.cpp mirrors
// them, taken for the busiest rank of the step (the root of a rooted one).
struct Staged {
  double in = 0, out = 0;
};

Staged staged_bytes(const sched::Step& st, int members, int64_t ub) {
  const double n = static_cast<double>(st.count * ub), p = std::max(members, 1);
  const double all = static_cast<double>(counts_total(st.counts) * ub);
  switch (st.kind) {
    case Kind::Allreduce:
    case Kind::Reduce: return {n, n};
    case Kind::ReduceScatter: return {all, all / p};
    case Kind::Allgather: return {n, n * p};
    case Kind::Allgatherv: return {all / p, all};
    case Kind::Bcast: return {n, n};
    case Kind::Alltoall: return {n * p, n * p};
    case Kind::Alltoallv: return {static_cast<double>(counts_total(st.counts) * ub), static_cast<double>(counts_total(st.rcounts) * ub)};
    case Kind::Scatterv:
    case Kind::Gatherv: return {all, all};
    case Kind::Send: return {n, 0};
    case Kind::Recv: return {0, n};
    default: return {0, 0};
  }
}

}  // namespace

const char* to_string(Placement p) {
  switch (p) {
    case Placement::Device: return "device";
    case Placement::Staged: return "staged";
    default: return "host";
  }
}

Model on_device(const Model& m, Placement where) {
  Model d = m;
  d.placement = where;
  if (where == Placement::Host) return d;
  d.copy_ns_per_byte = m.device.copy_ns_per_byte;
  for (int bits : {8, 4}) {
    const DeviceQuantRates& q = m.device.q(bits);
    d.quant(bits) = {q.quantize_ns_per_byte, q.dequantize_ns_per_byte, q.dequantize_add_ns_per_byte};
  }
  for (auto& v : d.hier_measured) v.clear();
  for (auto& v : d.hier_measured_nb) v.clear();
  return d;
}

double device_local_ns(const Model& m) { return m.placement == Placement::Host ? 0.0 : m.device.step_ns; }

double device_message_ns(const sched::Step& st, int members, int64_t ub, const Model& m) {
  if (m.placement == Placement::Host) return 0;
  if (m.placement == Placement::Device) return m.device.step_ns;
  if (st.bytes) ub = 1;  // steps on records move bytes
  const Staged b = staged_bytes(st, members, ub);
  // The wait before the step, the copy in (synchronized) and the copies back (waited for
  // before the next message step): three waits of the stream.
  return 3 * m.device.step_ns + b.in * m.device.d2h_ns_per_byte + b.out * m.device.h2d_ns_per_byte;
}

double device_flat_ns(config::Coll coll, int64_t bytes, int ranks, const Model& m) {
  if (m.placement != Placement::Staged) return 0;
  // Each rank's send and receive buffers as the planner counts the call's bytes: the vector
  // (allreduce, reduce, bcast), the whole vector in and its block out (reduce-scatter), a block
  // in and the whole vector out (allgather), what one rank sends and receives (alltoall).
  const double n = static_cast<double>(bytes), p = std::max(ranks, 1);
  double in = n, out = n;
  switch (coll) {
    case config::Coll::ReduceScatter:
    case config::Coll::ReduceScatterBlock: out = n / p; break;
    case config::Coll::Allgather:
    case config::Coll::Allgatherv: in = n / p; break;
    case config::Coll::Barrier: in = out = 0; break;
    default: break;
  }
  return 2 * m.device.step_ns + in * m.device.d2h_ns_per_byte + out * m.device.h2d_ns_per_byte;
}

}  // namespace hier::model
