#include "exec/prepare.hpp"

#include "core/wrap.hpp"
#include "diag/log.hpp"
#include "exec/typed.hpp"

namespace hier::exec {

bool may_rewrite(config::Coll coll, MPI_Datatype type, int64_t count) {
  const config::Algo forced = config::get().algo_for(coll);
  if (forced == config::Algo::Flat) return false;
  if (forced == config::Algo::Hier) return true;
  const MPI_Count size = type == MPI_DATATYPE_NULL ? -1 : core::type_size(type);
  if (size < 0) return true;  // the full path decides (and PMPI reports the error)
  return sched::worth_building({coll, count * size}, forced);
}

std::optional<Prepared> prepare(config::Coll coll, int64_t bytes, MPI_Comm comm) {
  const config::Algo forced = config::get().algo_for(coll);
  const sched::Query q{coll, bytes};
  if (!sched::worth_building(q, forced)) return std::nullopt;
  Context* ctx = context_of(comm);
  if (!ctx || !ctx->levels) return std::nullopt;
  Prepared p{ctx, sched::plan(q, ctx->levels->shape, forced)};
  if (p.plan.algo == sched::Algorithm::Flat) {
    HIER_TRACE("sched", "%s %lld bytes: flat (%s)", config::kCollKeys[static_cast<size_t>(coll)],
               static_cast<long long>(bytes), p.plan.why);
    return std::nullopt;
  }
  return p;
}

const sched::Schedule& schedule(Prepared& p, const sched::Key& key, const std::function<sched::Schedule()>& build) {
  bool built = false;
  const sched::Schedule& s = p.ctx->cache.get(key, build, &built);
  if (built) HIER_TRACE("sched", "rank %d: %s, %s: %s", p.ctx->levels->rank, sched::to_string(p.plan.algo),
                        p.plan.why, sched::to_string(s).c_str());
  return s;
}

bool predefined_op(MPI_Op op) {
  static const MPI_Op ops[] = {MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD, MPI_LAND, MPI_BAND, MPI_LOR,
                               MPI_BOR, MPI_LXOR, MPI_BXOR, MPI_MINLOC, MPI_MAXLOC};
  for (MPI_Op o : ops)
    if (o == op) return true;
  return false;
}

bool reorderable(MPI_Op op, const TypeInfo& t) {
  if (op == MPI_OP_NULL || op == MPI_REPLACE || op == MPI_NO_OP || !t.ok) return false;
  int commute = 0;
  if (PMPI_Op_commutative(op, &commute) != MPI_SUCCESS) return false;
  return commute != 0;
}

}  // namespace hier::exec
