#include "exec/prepare.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <nlohmann/json.hpp>

#include "core/hooks.hpp"
#include "core/wrap.hpp"
#include "diag/log.hpp"
#include "exec/fallback.hpp"
#include "exec/request.hpp"
#include "exec/typed.hpp"
#include "util/inject.hpp"

namespace hier::exec {

bool may_rewrite(config::Coll coll, MPI_Datatype type, int64_t count) {
  const config::Algo forced = config::get().algo_for(coll);
  if (forced == config::Algo::Flat) return false;
  if (forced == config::Algo::Hier) return true;
  const MPI_Count size = type == MPI_DATATYPE_NULL ? -1 : core::type_size(type);
  if (size < 0) return true;  // the full path decides (and PMPI reports the error)
  return sched::worth_building({coll, count * size}, forced);
}

std::optional<Prepared> prepare(config::Coll coll, int64_t bytes, MPI_Comm comm, bool nonblocking) {
  const config::Algo forced = config::get().algo_for(coll);
  const sched::Query q{coll, bytes};
  if (!sched::worth_building(q, forced)) return std::nullopt;
  Context* ctx = context_of(comm);
  if (!ctx || !ctx->levels || ctx->gpu_anywhere) return std::nullopt;
  Prepared p{ctx, sched::plan(q, ctx->levels->shape, forced)};
  if (p.plan.algo == sched::Algorithm::Flat) {
    HIER_TRACE("sched", "%s %lld bytes: flat (%s)", config::kCollKeys[static_cast<size_t>(coll)],
               static_cast<long long>(bytes), p.plan.why);
    return std::nullopt;
  }
  before_call(ctx, nonblocking);
  return p;
}

std::shared_ptr<const sched::Schedule> schedule(Prepared& p, const sched::Key& key, const Build& build, const Acquirer& acquire,
                                int variant, bool both) {
  if (const sched::Cache::Entry* hit = p.ctx->cache.find(key)) return hit->variant[variant];
  // 0: acquired; otherwise 1 + the point that failed here. An exception (std::bad_alloc from a
  // builder) is a failure like any other: it must not leave this rank out of the agreement.
  int failed = 0;
  bool inserted = false;
  try {
    if (util::injected_failure("plan")) {
      failed = 1 + static_cast<int>(Acquire::Plan);
    } else {
      sched::Cache::Entry& e = p.ctx->cache.insert(key);
      inserted = true;
      for (int v = 0; v < sched::Cache::kVariants; ++v)
        if (v == variant || both) e.variant[v] = std::make_unique<sched::Schedule>(build(v));
      failed = 1 + static_cast<int>(Acquire::Scratch);
      bool ok = !util::injected_failure("scratch");
      for (int v = 0; v < sched::Cache::kVariants && ok; ++v)
        if (e.variant[v]) ok = acquire(*e.variant[v]);
      if (ok) failed = 0;
    }
  } catch (...) {
    if (!failed) failed = 1 + static_cast<int>(Acquire::Plan);
  }
  // A blocking allreduce, also inside a nonblocking call (MPI_Iallreduce, exec/request.hpp):
  // every rank makes the program's collective calls on this communicator in one order, so every
  // rank misses on the same call and reaches this agreement there, whatever requests are
  // outstanding (they run on the level communicators, never on `internal`). The cost: the first
  // call with a new key synchronizes the ranks like a blocking collective would.
  int agreed = failed;
  if (PMPI_Allreduce(&failed, &agreed, 1, MPI_INT, MPI_MAX, p.ctx->levels->internal) != MPI_SUCCESS)
    agreed = std::max(failed, 1 + static_cast<int>(Acquire::Scratch));
  if (agreed != 0) {
    if (inserted) p.ctx->cache.erase(key);
    note_fallback(static_cast<Acquire>(agreed - 1), failed != 0);
    return nullptr;
  }
  std::shared_ptr<const sched::Schedule> s = p.ctx->cache.find(key)->variant[variant];
  HIER_TRACE("sched", "rank %d: %s, %s: %s", p.ctx->levels->rank, sched::to_string(p.plan.algo), p.plan.why,
             sched::to_string(*s).c_str());
  return s;
}

namespace {
struct PipeCount {
  std::atomic<uint64_t> calls{0}, chunks{0};
};
std::array<PipeCount, static_cast<size_t>(config::Coll::Count)> g_pipe;

std::string pipeline_report() {
  nlohmann::json j = nlohmann::json::object();
  for (size_t c = 0; c < g_pipe.size(); ++c)
    if (const uint64_t n = g_pipe[c].calls.load())
      j[config::kCollKeys[c]] = {{"calls", n}, {"chunks", g_pipe[c].chunks.load()}};
  return j.dump();
}
}  // namespace

void note_pipelined(config::Coll coll, int chunks) {
  static const bool registered = (core::add_report_section("pipeline", pipeline_report), true);
  (void)registered;
  g_pipe[static_cast<size_t>(coll)].calls.fetch_add(1, std::memory_order_relaxed);
  g_pipe[static_cast<size_t>(coll)].chunks.fetch_add(static_cast<uint64_t>(chunks), std::memory_order_relaxed);
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
