#include "dtype/planner.hpp"

#include <optional>

#include "dtype/tune.hpp"

namespace hier::dtype {
namespace {

Size size_of(const Canon& c, int64_t count) {
  return {static_cast<double>(count) * static_cast<double>(c.size),
          static_cast<double>(count) * static_cast<double>(c.blocks)};
}

// nullopt: the model decides.
std::optional<bool> forced(const TuneModel& m) {
  if (m.policy == TuneModel::Policy::Always) return true;
  if (m.policy == TuneModel::Policy::Never) return false;
  return std::nullopt;
}

// Packed, a message costs the engine's pack and unpack, plus the contiguous message, which
// moves the packed bytes through the transport with (at least) two more copies. The MPI alone
// moves them with its own pack and unpack instead of those copies (or fewer copies, with a
// single-copy transport). So packing can only win when the engine's pack + unpack + two dense
// copies beat the MPI's pack + unpack: a necessary condition from the pack lines alone, which
// are measured in one process and reliable, unlike the end-to-end lines on a busy machine.
// Where the MPI's datatype engine is near memory speed (Open MPI from ~64-byte blocks), this
// leaves the message to the MPI.
bool pack_can_win(const TuneModel& m, const Size& s) {
  const double copies = (m.engine_pack.ns_per_byte + m.engine_unpack.ns_per_byte) * s.bytes;
  return m.engine_pack.at(s.bytes, s.blocks) + m.engine_unpack.at(s.bytes, s.blocks) + copies <
         m.mpi_pack.at(s.bytes, s.blocks) + m.mpi_unpack.at(s.bytes, s.blocks);
}

}  // namespace

bool p2p_pays(const TuneModel& m, const Size& s) {
  if (s.bytes < static_cast<double>(m.min_bytes)) return false;
  const double ours = m.engine_pack.at(s.bytes, s.blocks) + m.engine_unpack.at(s.bytes, s.blocks) +
                      m.contig_p2p.at(s.bytes, 1);
  return ours < m.mpi_p2p.at(s.bytes, s.blocks) && pack_can_win(m, s);
}

namespace {

bool p2p(const Canon& c, int64_t count) {
  const TuneModel& m = tune_model();
  if (auto f = forced(m)) return *f;
  return p2p_pays(m, size_of(c, count));
}

bool engine(const Canon& c, int64_t count, const CostLine& ours, const CostLine& theirs) {
  if (auto f = forced(tune_model())) return *f;
  const Size s = size_of(c, count);
  return ours.at(s.bytes, s.blocks) <= theirs.at(s.bytes, s.blocks);
}

}  // namespace

bool plan_pack_send(const Canon& c, int64_t count) { return p2p(c, count); }
bool plan_pack_recv(const Canon& c, int64_t count) { return p2p(c, count); }

bool plan_engine_pack(const Canon& c, int64_t count) {
  const TuneModel& m = tune_model();
  return engine(c, count, m.engine_pack, m.mpi_pack);
}

bool plan_engine_unpack(const Canon& c, int64_t count) {
  const TuneModel& m = tune_model();
  return engine(c, count, m.engine_unpack, m.mpi_unpack);
}

bool device_kernels_pay(const TuneModel& m, const DeviceCase& d) {
  const TuneModel::Device& r = m.device;
  const Size& s = d.size;
  const CostLine& kernel = d.to_packed ? r.kernel_pack : r.kernel_unpack;
  const double ours = kernel.at(s.bytes, s.blocks) + r.copy.at(s.bytes, 1);
  double theirs = 0;
  if (d.gpu_aware) {
    theirs = r.mpi_pack.at(s.bytes, s.blocks);
  } else {
    // A send copies the span in and packs it on the host; a receive also copies it back.
    const CostLine& host = d.to_packed ? m.engine_pack : m.engine_unpack;
    theirs = r.copy.at(d.span, 1) * (d.to_packed ? 1 : 2) + host.at(s.bytes, s.blocks);
  }
  return ours <= theirs;
}

bool plan_device_kernels(const Canon& c, int64_t count, bool to_packed, bool gpu_aware) {
  const TuneModel& m = tune_model();
  if (auto f = forced(m)) return *f;
  const double ext = static_cast<double>(c.extent < 0 ? -c.extent : c.extent);
  const double span = static_cast<double>(count - 1) * ext + static_cast<double>(c.true_extent);
  return device_kernels_pay(m, {size_of(c, count), span, to_packed, gpu_aware});
}

}  // namespace hier::dtype
