#include "dtype/planner.hpp"

#include <optional>

#include "dtype/tune.hpp"

namespace hier::dtype {
namespace {

struct Size {
  double bytes, blocks;
};
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

bool p2p(const Canon& c, int64_t count) {
  const TuneModel& m = tune_model();
  if (auto f = forced(m)) return *f;
  const Size s = size_of(c, count);
  if (s.bytes < static_cast<double>(m.min_bytes)) return false;
  const double ours = m.engine_pack.at(s.bytes, s.blocks) + m.engine_unpack.at(s.bytes, s.blocks) +
                      m.contig_p2p.at(s.bytes, 1);
  return ours < m.mpi_p2p.at(s.bytes, s.blocks);
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

}  // namespace hier::dtype
