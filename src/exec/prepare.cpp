#include "exec/prepare.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>

#include "base/hooks.hpp"
#include "base/runtime.hpp"
#include "diag/log.hpp"
#include "diag/trace.hpp"
#include "exec/executor.hpp"
#include "exec/fallback.hpp"
#include "exec/request.hpp"
#include "exec/typed.hpp"
#include "model/load.hpp"
#include "util/inject.hpp"

namespace hier::exec {

namespace {

// The planner's pre-check size of `coll` for the process's model (model::hier_from, HIER_QUANT's
// quantized schedules included), computed
// once per collective, the first time a call of it gets here.
int64_t gate(config::Coll coll) {
  static std::array<std::once_flag, model::kColls> once;
  static std::array<int64_t, model::kColls> from{};
  const size_t c = static_cast<size_t>(coll);
  std::call_once(once[c], [&] { from[c] = model::hier_from(model::process().model, coll, &config::get()); });
  return from[c];
}

// Report: per collective, the calls planned each way and the predicted times (ns) of the
// chosen plan and of the other option.
struct PlanCount {
  std::atomic<uint64_t> hier{0}, flat{0}, quantized{0};  // quantized: plans that chose HIER_QUANT
  std::atomic<double> chosen_ns{0}, other_ns{0}, quant_ns{0};
};
std::array<PlanCount, static_cast<size_t>(config::Coll::Count)> g_plans;

void add(std::atomic<double>& a, double x) {
  double v = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(v, v + x, std::memory_order_relaxed)) {
  }
}

std::string planner_report() {
  nlohmann::json j = nlohmann::json::object();
  j["model"] = model::process().model.source;
  for (size_t c = 0; c < g_plans.size(); ++c) {
    const PlanCount& n = g_plans[c];
    if (!n.hier.load() && !n.flat.load()) continue;
    j[config::kCollKeys[c]] = {{"hier", n.hier.load()}, {"flat", n.flat.load()},
                               {"predicted_ms", n.chosen_ns.load() / 1e6}, {"other_ms", n.other_ns.load() / 1e6}};
    // HIER_QUANT: calls whose plan chose the quantized schedule, and the predicted times of the
    // quantized schedule summed over every costed call (the exact plans' are above).
    if (n.quant_ns.load() > 0)
      j[config::kCollKeys[c]].update({{"quantized", n.quantized.load()}, {"quantized_ms", n.quant_ns.load() / 1e6}});
  }
  return j.dump();
}

void count_plan(config::Coll coll, const model::Plan& p) {
  static const bool registered = (base::add_report_section("planner", planner_report), true);
  (void)registered;
  PlanCount& n = g_plans[static_cast<size_t>(coll)];
  const bool hier = p.algo != sched::Algorithm::Flat;
  (hier ? n.hier : n.flat).fetch_add(1, std::memory_order_relaxed);
  add(n.chosen_ns, hier ? p.hier_ns : p.flat_ns);
  add(n.other_ns, hier ? p.flat_ns : p.hier_ns);
  if (p.quant_bits) n.quantized.fetch_add(1, std::memory_order_relaxed);
  add(n.quant_ns, p.quant_ns);
}

}  // namespace

bool may_rewrite(config::Coll coll, MPI_Datatype type, int64_t count) {
  const config::Algo forced = config::get().algo_for(coll);
  if (forced == config::Algo::Flat) return false;
  if (forced == config::Algo::Hier) return true;
  const MPI_Count size = type == MPI_DATATYPE_NULL ? -1 : base::type_size(type);
  if (size < 0) return true;  // the full path decides (and PMPI reports the error)
  return model::worth_building({coll, count * size}, gate(coll), config::get());
}

std::optional<Prepared> prepare(config::Coll coll, int64_t bytes, MPI_Comm comm, int64_t elem_size,
                                bool nonblocking, bool quantizable) {
  const config::Config& cfg = config::get();
  model::Call call{coll, bytes, elem_size, quantizable, nonblocking};
  if (!model::worth_building(call, gate(coll), cfg)) return std::nullopt;
  Context* ctx = context_of(comm);
  if (!ctx || !ctx->levels || ctx->device_to_mpi) return std::nullopt;
  const auto key = std::make_tuple(static_cast<int>(coll), bytes, elem_size, quantizable, nonblocking);
  auto it = ctx->plans.find(key);
  if (it == ctx->plans.end()) {
    if (ctx->plans.size() >= 1024) ctx->plans.clear();  // bounded; the same on every rank
    // Agreed by every rank with the levels, so every rank plans alike (model/cost_device.hpp).
    if (ctx->device_hier) call.where = ctx->device_stage ? model::Placement::Staged : model::Placement::Device;
    it = ctx->plans.emplace(key, model::plan(call, ctx->levels->shape, model::process().model, cfg)).first;
    HIER_TRACE("sched", "%s %lld bytes: %s", config::coll_key(coll), static_cast<long long>(bytes),
               model::describe(it->second).c_str());
  }
  Prepared p{ctx, it->second, elem_size};
  count_plan(coll, p.plan);
  if (diag::trace::g_on) {  // HIER_TRACE: the call's slice carries the plan
    const model::Plan& pl = p.plan;
    const bool q = pl.quant_bits != 0;
    diag::trace::note_plan(config::coll_key(coll), bytes, q ? "quantized" : sched::to_string(pl.algo),
                           q ? pl.quant_chunks : pl.chunks, pl.quant_bits, q ? pl.quant_ns : pl.hier_ns, pl.flat_ns,
                           q ? pl.quant_why : pl.why);
  }
  // A flat plan still comes here when the quantized schedule won (HIER_QUANT, plan.quant_bits;
  // blocking, nonblocking and persistent calls alike): the caller tries it and returns to the
  // MPI if it declines the call.
  if (p.plan.algo == sched::Algorithm::Flat && !p.plan.quant_bits) return std::nullopt;
  before_call(ctx, nonblocking);
  return p;
}

std::shared_ptr<const sched::Schedule> schedule(Prepared& p, const sched::Key& call_key, const Build& build,
                                                const Acquirer& acquire, int variant, bool both) {
  // HIER_SHM: the plan's transport, exact or quantized, is part of what the schedule is.
  sched::Key key = call_key;
  key.shm = key.quant ? p.plan.quant_shm : p.plan.shm;
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
        if (v == variant || both) {
          sched::Schedule built = build(v);
          built.direct_rs_from = p.plan.direct_rs_from;
          built.padded_agv_from = p.plan.padded_agv_from;
          // (HIER_SHM: the plan's transport for this schedule, exact or quantized, and each
          // step's single copy or copy-in, as the plan costed them; where a communicator has
          // no segment the executor falls back to messages and counts it)
          // (never on a device_hier communicator: a rank may bind device buffers, which the
          // segments' host copies must not touch; the context is the same on every rank)
          if (key.shm && !p.ctx->device_hier) route_shm(built, *p.ctx->levels, p.elem_size);
          e.variant[v] = std::make_shared<const sched::Schedule>(std::move(built));
        }
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
  HIER_TRACE("sched", "rank %d: %s: %s", p.ctx->levels->rank, model::describe(p.plan).c_str(),
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
  static const bool registered = (base::add_report_section("pipeline", pipeline_report), true);
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

int intracomm_size(MPI_Comm comm) {
  int inter = 0, size = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return 0;
  PMPI_Comm_size(comm, &size);
  return size;
}

}  // namespace hier::exec
