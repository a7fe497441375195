// Device-bound schedules' costs (model/cost_device.hpp).
#include "model/cost_device.hpp"

#include <algorithm>

#include "model/cost.hpp"
#include "sched/pieces.hpp"

namespace hier::model {

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
  // The bytes exec/device_stage.cpp copies device -> host before the PMPI call (read) and back
  // after it (written), from the one walk of the step's pieces both use, on the busiest rank
  // of each side.
  const sched::PieceBytes b = sched::most_piece_bytes(st, members, ub);
  // The wait before the step, the copy in (synchronized) and the copies back (waited for
  // before the next message step): three waits of the stream.
  return 3 * m.device.step_ns + static_cast<double>(b.read) * m.device.d2h_ns_per_byte +
         static_cast<double>(b.written) * m.device.h2d_ns_per_byte;
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
