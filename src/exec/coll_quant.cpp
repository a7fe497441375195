// Quantized hierarchical collectives (ZeRO++ qgZ / qwZ idea; docs/quantization.md): the entry
// points of MPI_Allreduce, MPI_Reduce_scatter(_block) and MPI_Allgather under HIER_QUANT, in
// their blocking, nonblocking (MPI_I...) and persistent (MPI_..._init) forms. Each entry point
// decides and prepares the call once (a QuantCall: decision, schedule, site, statistics, what
// the check compares); run_or_start() then runs it blocking on the context's memory, or as a
// request (exec/request.hpp) on memory of its own in the same layout, with begin() as the
// request's `before` hook and finish() as its `after` hook. The
// algorithms are schedules (sched/build_quant.cpp: Quantize, Alltoallv of records,
// DequantizeReduce in one fixed node order, Dequantize, ...), run by the executor
// (exec/executor.cpp) like every other schedule and printed by HIER_DEBUG=TRACE at the
// schedule-cache miss. Here: the decision (from the type signature and what every rank shares),
// the schedule key, the memory reserved and agreed on at the miss (scratch values, records, the
// direct level steps' buffers, the check's copies: nothing large is allocated once the ranks
// depend on each other), error feedback (HIER_QUANT_FEEDBACK: the call site's residual, bound to
// the run; requests outstanding on one site share it, one quantize step at a time), the check
// (HIER_QUANT_CHECK: the exact collective started nonblocking on libhier's internal
// communicator where the call is made, compared once both are done) and the report's
// "quantization" section.
// Error per element (docs/quantization.md): allreduce at most (sum over nodes of the scales of
// the piece's block)/2 plus (scale of the reduced block)/2 plus float rounding of the sums;
// reduce-scatter the first term; allgather (scale of the block)/2. A NaN or Inf in a block
// gives it a NaN scale (quant/format.hpp): the whole block becomes NaN on every rank.
#include "exec/coll_quant.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "base/hooks.hpp"
#include "diag/log.hpp"
#include "exec/direct.hpp"
#include "exec/executor.hpp"
#include "exec/request.hpp"
#include "sched/build.hpp"
#include "dtype/signature.hpp"
#include "quant/quant.hpp"

namespace hier::exec {
namespace {

using config::Coll;

thread_local diag::AlgoTag g_tag = diag::AlgoTag::Hier;

// HIER_QUANT_BLOCK: values per block. Read from the configuration, which is fixed from MPI_Init
// on and agreed on by every rank (core/agree_config.cpp: same_on_every_rank), so every layout
// below is the same on every rank and on every call with the same schedule key (which holds it).
int64_t kb() { return config::get().quant_block; }

int64_t align64(int64_t b) { return (b + 63) / 64 * 64; }

int64_t qbytes(int64_t n, int bits) { return quant::quantized_bytes(n, kb(), bits); }

// ---- Statistics, error feedback and the check (one mutex: quantized calls are large) --------

std::mutex g_mu;

constexpr Coll kQuantColls[] = {Coll::Allreduce, Coll::ReduceScatterBlock, Coll::ReduceScatter, Coll::Allgather};

struct CollStats {
  uint64_t calls = 0, int8 = 0, int4 = 0;
  uint64_t requests = 0;  // of those calls, nonblocking or persistent (one per start)
  uint64_t cross_exact = 0, cross_sent = 0;  // bytes this rank sends across nodes: exact equivalent, quantized
  uint64_t checked = 0;
  double max_abs = 0, max_rel = 0;
  double quant_ns = 0, exact_ns = 0;  // the planner's predictions for these calls, summed
};
std::map<Coll, CollStats> g_stats;

// A call site: communicator context, collective, buffer address and count.
using Site = std::tuple<const Context*, Coll, const void*, int64_t>;
struct SiteCheck {
  uint64_t checked = 0;
  double max_abs = 0, max_rel = 0;
};
constexpr size_t kMaxCheckedSites = 64;
std::map<Site, SiteCheck> g_site_checks;
uint64_t g_sites_unrecorded = 0;

// Shared with the calls that use it: a request holds its site's residual until it completes, so
// that a later call replacing the site's memory (another size) never frees it under the request.
struct Residual {
  std::shared_ptr<char[]> mem;
  int64_t bytes = 0;
};
std::map<Site, Residual> g_residuals;
int64_t g_residual_bytes = 0;
uint64_t g_residual_refused = 0, g_feedback_calls = 0;

std::map<std::pair<const Context*, Coll>, uint64_t> g_check_counters;

std::string report() {
  std::lock_guard<std::mutex> lk(g_mu);
  nlohmann::json j = nlohmann::json::object();
  nlohmann::json colls = nlohmann::json::object();
  for (const auto& [c, st] : g_stats) {
    nlohmann::json e = {{"calls", st.calls},
                        {"int8", st.int8},
                        {"int4", st.int4},
                        {"requests", st.requests},
                        {"cross_bytes_exact", st.cross_exact},
                        {"cross_bytes_sent", st.cross_sent},
                        {"cross_bytes_saved", st.cross_exact - st.cross_sent},
                        {"predicted_ms", st.quant_ns / 1e6},
                        {"exact_predicted_ms", st.exact_ns / 1e6}};
    if (st.checked) e["check"] = {{"calls", st.checked}, {"max_abs_error", st.max_abs}, {"max_rel_error", st.max_rel}};
    colls[config::kCollKeys[static_cast<size_t>(c)]] = e;
  }
  j["collectives"] = colls;
  j["block"] = kb();
  const int64_t cap = config::get().quant_feedback_cap;
  if (cap > 0)
    j["feedback"] = {{"cap_bytes", cap}, {"bytes", g_residual_bytes}, {"sites", g_residuals.size()},
                     {"calls", g_feedback_calls}, {"sites_refused", g_residual_refused}};
  if (!g_site_checks.empty()) {
    nlohmann::json sites = nlohmann::json::array();
    for (const auto& [site, sc] : g_site_checks) {
      char addr[32];
      std::snprintf(addr, sizeof addr, "%p", std::get<2>(site));
      sites.push_back({{"collective", config::kCollKeys[static_cast<size_t>(std::get<1>(site))]},
                       {"buffer", addr},
                       {"count", std::get<3>(site)},
                       {"checked", sc.checked},
                       {"max_abs_error", sc.max_abs},
                       {"max_rel_error", sc.max_rel}});
    }
    j["checked_sites"] = sites;
    if (g_sites_unrecorded) j["checked_sites_not_listed"] = g_sites_unrecorded;
  }
  return j.dump();
}

void register_report() {
  static const bool registered = (base::add_report_section("quantization", report), true);
  (void)registered;
}

void note_call(Coll c, int bits, int64_t exact_bytes, int64_t sent_bytes, const model::Plan& plan, bool request) {
  register_report();
  std::lock_guard<std::mutex> lk(g_mu);
  CollStats& st = g_stats[c];
  ++st.calls;
  ++(bits == 8 ? st.int8 : st.int4);
  if (request) ++st.requests;
  st.cross_exact += static_cast<uint64_t>(exact_bytes);
  st.cross_sent += static_cast<uint64_t>(sent_bytes);
  st.quant_ns += plan.quant_ns;
  st.exact_ns += plan.algo == sched::Algorithm::Flat ? plan.flat_ns : plan.hier_ns;
}

// The residual of a call site (`bytes` long, zero at first), or null: feedback off, or the cap
// reached. Purely local: whether a rank has one changes only the values it quantizes, never
// what any rank sends or receives, so ranks need not agree on it. Requests outstanding together
// on one site (the same send buffer and count: legal for nonblocking calls) share it: their
// quantize steps run one at a time (exec/request.cpp's lock; a blocking call on the
// communicator first completes its requests), each adding what the previous one left, so the
// errors still telescope over the calls, in the order their quantize steps ran.
std::shared_ptr<char[]> residual(const Site& site, int64_t bytes) {
  const int64_t cap = config::get().quant_feedback_cap;
  if (cap <= 0 || bytes <= 0) return nullptr;
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_residuals.find(site);
  if (it != g_residuals.end() && it->second.bytes == bytes) {
    ++g_feedback_calls;
    return it->second.mem;
  }
  const int64_t freed = it != g_residuals.end() ? it->second.bytes : 0;
  if (g_residual_bytes - freed + bytes > cap) {
    ++g_residual_refused;
    return nullptr;
  }
  std::shared_ptr<char[]> mem(new (std::nothrow) char[static_cast<size_t>(bytes)]);
  if (!mem) {
    ++g_residual_refused;
    return nullptr;
  }
  std::memset(mem.get(), 0, static_cast<size_t>(bytes));
  g_residual_bytes += bytes - freed;
  Residual& r = g_residuals[site];
  r.mem = std::move(mem);
  r.bytes = bytes;
  ++g_feedback_calls;
  return r.mem;
}

// Whether this call is one that HIER_QUANT_CHECK samples: every Nth quantized call per
// communicator and collective. The same on every rank (every rank makes the same sequence of
// collective calls on a communicator, and eligibility is decided from what they share).
bool check_this_call(const Context* ctx, Coll c) {
  const int every = config::get().quant_check_every;
  if (every <= 0) return false;
  std::lock_guard<std::mutex> lk(g_mu);
  return g_check_counters[{ctx, c}]++ % static_cast<uint64_t>(every) == 0;
}

// Records the error of `got` against `exact` (n values): the largest absolute difference, and
// that divided by the largest |exact| (a norm-relative error; per-element relative errors are
// meaningless next to zero). Non-finite exact values are left out.
template <class T>
void note_check(const Site& site, const T* got, const T* exact, int64_t n) {
  double mabs = 0, mref = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = static_cast<double>(exact[i]);
    if (!std::isfinite(e)) continue;
    const double d = std::fabs(static_cast<double>(got[i]) - e);
    mabs = std::isnan(d) ? INFINITY : std::max(mabs, d);
    mref = std::max(mref, std::fabs(e));
  }
  const double rel = mabs == 0 ? 0.0 : (mref > 0 ? mabs / mref : INFINITY);
  std::lock_guard<std::mutex> lk(g_mu);
  CollStats& st = g_stats[std::get<1>(site)];
  ++st.checked;
  st.max_abs = std::max(st.max_abs, mabs);
  st.max_rel = std::max(st.max_rel, rel);
  auto it = g_site_checks.find(site);
  if (it == g_site_checks.end()) {
    if (g_site_checks.size() >= kMaxCheckedSites) {
      ++g_sites_unrecorded;
      return;
    }
    it = g_site_checks.emplace(site, SiteCheck{}).first;
  }
  ++it->second.checked;
  it->second.max_abs = std::max(it->second.max_abs, mabs);
  it->second.max_rel = std::max(it->second.max_rel, rel);
}

sched::Key quant_key(Coll c, const Prepared& p, bool in_place, int64_t n, const TypeInfo& t, int bits) {
  sched::Key key{static_cast<uint8_t>(c), p.plan.algo, in_place, false, -1, n, {}, p.plan.quant_chunks};
  key.extent = t.extent;
  key.true_extent = t.true_extent;
  key.true_lb = t.true_lb;
  key.quant = static_cast<uint8_t>(bits);
  key.quant_block = static_cast<int32_t>(kb());
  return key;
}

// The builders' parameters: the bits, HIER_QUANT_BLOCK and the plan's choices of level steps
// (direct reduce-scatter, padded allgathers), the same on every rank.
sched::QuantParams params(const Prepared& p, int bits, bool block_variant) {
  sched::QuantParams q;
  q.bits = bits;
  q.block = kb();
  q.direct_rs_from = p.plan.direct_rs_from;
  q.padded_agv_from = p.plan.padded_agv_from;
  q.block_variant = block_variant;
  q.chunks = p.plan.quant_chunks;  // pipelined (the allgather: never; Plan::quant_chunks)
  return q;
}

// ---- One quantized call, prepared once, run blocking or as a request --------------------------

// The memory of a quantized schedule on values of `t`, in one buffer: its values (scratch), its
// records, then `check` bytes for the check's copies. Reserved at the schedule-cache miss in the
// context's scratch (blocking calls run there); a request takes the same layout on memory of its
// own (exec::request_scratch), or on the context's when that allocation fails.
int64_t records_at(const sched::Schedule& s, const TypeInfo& t) { return align64(s.scratch * t.size); }
int64_t check_at(const sched::Schedule& s, const TypeInfo& t) { return align64(records_at(s, t) + s.records); }
int64_t memory_bytes(const sched::Schedule& s, const TypeInfo& t, int64_t check) { return check_at(s, t) + check; }

// The schedule of a quantized call (HIER_DEBUG=TRACE prints it at the miss) and, at the miss,
// the memory it needs, agreed on by every rank: its scratch, records and the check's copies, and
// the direct level steps' buffers (exec::reserve). Null: some rank failed, go exact.
std::shared_ptr<const sched::Schedule> quant_schedule(Prepared& p, const sched::Key& key, const TypeInfo& t,
                                                      int64_t check_bytes, const Build& build, int variant = 0,
                                                      bool both = false) {
  return schedule(p, key, build, [&](const sched::Schedule& s) {
    return p.ctx->scratch.get(static_cast<size_t>(memory_bytes(s, t, check_bytes))) != nullptr &&
           reserve(s, *p.ctx->levels, &t, &p.ctx->tmp);
  }, variant, both);
}

int64_t check_bytes_if(int64_t bytes) { return config::get().quant_check_every > 0 ? bytes : 0; }


// Record bytes this rank sends to other nodes in the schedule's steps across nodes.
int64_t cross_bytes_sent(const sched::Schedule& s, const topo::Levels& lv) {
  const int me = lv.my_node(), others = lv.shape.nnodes - 1;
  int64_t b = 0;
  for (const sched::Step& st : s.steps) {
    if (st.comm.on != sched::On::Cross || !st.bytes) continue;
    if (st.kind == sched::Kind::Alltoallv)
      for (size_t j = 0; j < st.counts.size(); ++j) b += static_cast<int>(j) == me ? 0 : st.counts[j];
    else if (st.kind == sched::Kind::Allgatherv) b += st.counts[static_cast<size_t>(me)] * others;
    else if (st.kind == sched::Kind::Allgather) b += st.count * others;
  }
  return b;
}

// The allgather's user blocks: my block packed from the send buffer (my block of recvbuf in
// place) in its own type; block r of the result unpacked into recvbuf in the receive type.
class AgBlocks final : public Blocks {
 public:
  AgBlocks(const char* src, int64_t scount, const TypeInfo& st, char* recv, int64_t stride, int64_t rcount,
           const TypeInfo& rt)
      : src_(src), scount_(scount), st_(st), recv_(recv), stride_(stride), rcount_(rcount), rt_(rt) {}
  int load(int, char* dst, int64_t) override { return pack(src_, scount_, st_, dst); }
  int store(int block, const char* src, int64_t) override { return unpack(src, rcount_, rt_, recv_ + block * stride_); }

 private:
  const char* src_;
  int64_t scount_;
  const TypeInfo& st_;
  char* recv_;
  int64_t stride_, rcount_;
  const TypeInfo& rt_;
};

// Whether a reduction's datatype may run quantized: the predefined MPI_FLOAT / MPI_DOUBLE (the
// handle), and MPIX_C_FLOAT16 where the MPI itself reduces it with MPI_SUM (HIER_MPI_REDUCES_F16,
// probed at configure time: MPICH 4.0.2 aborts in every reduction of it, so there the call is
// passed on exactly and fails as with the MPI alone; a quantized call must not succeed where the
// exact one cannot, nor its intra-node exact reduce-scatter run into that abort). The standard
// asks for the same datatype on every rank of a reduction, and both MPIs reject MPI_SUM on a
// derived datatype, a duplicate of MPI_FLOAT included (MPI_ERR_OP: Open MPI 4.1, MPICH 4.0), so
// no correct program passes MPI_FLOAT on one rank and an equivalent derived type on another, and
// such a call still fails as with the MPI alone.
bool reduction_type(MPI_Datatype type) {
  return type == MPI_FLOAT || type == MPI_DOUBLE || (HIER_MPI_REDUCES_F16 && quant_f16(type));
}

// The element type's name in the trace.
const char* elem_name(MPI_Datatype t) { return t == MPI_FLOAT ? "float" : t == MPI_DOUBLE ? "double" : "float16"; }

// note_check on the values of the element type `elem` (one the kernels take: quant_elem).
void note_check_elem(const Site& site, MPI_Datatype elem, const void* got, const void* exact, int64_t n) {
  if (elem == MPI_FLOAT) note_check(site, static_cast<const float*>(got), static_cast<const float*>(exact), n);
  else if (elem == MPI_DOUBLE) note_check(site, static_cast<const double*>(got), static_cast<const double*>(exact), n);
#if HIER_QUANT_F16
  else note_check(site, static_cast<const quant::f16*>(got), static_cast<const quant::f16*>(exact), n);
#endif
}

// Everything a quantized call's entry point decided (quant_allreduce, quant_reduce_scatter,
// quant_allgather: the decision, the schedule, the site, the statistics, what the check
// compares), shared by the blocking run and the request. On the heap: a request keeps it (its
// hooks hold it) until the request is freed, across the starts of a persistent one.
struct QuantCall {
  Coll coll = Coll::Allreduce;
  int bits = 0;
  Context* ctx = nullptr;
  model::Plan plan;                          // for the report's predicted times
  std::shared_ptr<const sched::Schedule> s;
  TypeInfo t;                                // the values' type (MPI_FLOAT / MPI_DOUBLE / MPIX_C_FLOAT16): the schedule's unit
  const char* send = nullptr;                // the Binding's buffers
  char* recv = nullptr;
  Site site;
  int64_t exact_bytes = 0, sent_bytes = 0;   // across nodes per call: exact equivalent, records sent
  int64_t check_bytes = 0;                   // reserved after the records (0: HIER_QUANT_CHECK is off)
  // The allgather's user types (held by a request until it completes) and blocks.
  TypeInfo st, rt;
  const char* src = nullptr;
  int64_t scount = 0, rcount = 0, block_stride = 0;
  std::unique_ptr<AgBlocks> blocks;
  // The check, in the check memory: the exact result [0, out_n values); the exact call's input
  // at in_off (in_bytes), copied there from `in` when copy_in (in place: the run overwrites it)
  // or loaded through `blocks` when `in` is null, otherwise read at `in`; a non-dense receive
  // layout's result packed at dense_off (0: dense).
  const char* in = nullptr;
  bool copy_in = false;
  int64_t in_off = 0, in_bytes = 0, out_n = 0, dense_off = 0;
  std::vector<int> icounts;  // reduce-scatter: the counts as the MPI takes them (read until it completes)
  // Per call, or per start of a persistent request: the site's residual, whether the check
  // samples this one and its exact collective while it runs.
  std::shared_ptr<char[]> res;
  bool check = false;
  MPI_Request exact = MPI_REQUEST_NULL;
};

// A quantized call of `coll` on schedule `s` (values of `t`): what every entry point sets alike.
// The call site: `site_buf` (the input buffer) and `site_count`. Tags the call for the report.
std::unique_ptr<QuantCall> new_call(Coll coll, int bits, const Prepared& p, std::shared_ptr<const sched::Schedule> s,
                                    const TypeInfo& t, const void* site_buf, int64_t site_count, int64_t check_bytes) {
  g_tag = bits == 8 ? diag::AlgoTag::HierInt8 : diag::AlgoTag::HierInt4;
  auto q = std::make_unique<QuantCall>();
  q->coll = coll;
  q->bits = bits;
  q->ctx = p.ctx;
  q->plan = p.plan;
  q->s = std::move(s);
  q->t = t;
  q->site = Site{p.ctx, coll, site_buf, site_count};
  q->sent_bytes = cross_bytes_sent(*q->s, *p.ctx->levels);
  q->check_bytes = check_bytes;
  return q;
}

// The allgather's blocks, once `q` is where it stays (they refer to its types).
void make_blocks(QuantCall& q) {
  if (q.coll == Coll::Allgather)
    q.blocks = std::make_unique<AgBlocks>(q.src, q.scount, q.st, q.recv, q.block_stride, q.rcount, q.rt);
}

// The Binding of q's schedule on memory `mem` (memory_bytes of q's layout).
void bind(Binding& b, QuantCall& q, char* mem) {
  b.send = q.send;
  b.recv = q.recv;
  b.scratch = mem;
  b.records = mem + records_at(*q.s, q.t);
  b.stride = q.t.size;
  b.type = q.t.type;
  b.op = MPI_SUM;
  b.info = &q.t;
  b.blocks = q.blocks.get();
  b.residual = q.res.get();
}

// The exact collective of the check, started nonblocking on libhier's internal duplicate of the
// communicator (topo::Levels::internal) into chk[0, ...). Started by every rank where the call
// is made (blocking or nonblocking: in the program's order of calls, which MPI makes the same on
// every rank), so it matches whatever moment each rank completes it; the user's communicator
// never carries it, and so never sees a collective the program did not make.
int start_exact(QuantCall& q, char* chk) {
  const char* in = q.copy_in || !q.in ? chk + q.in_off : q.in;
  const MPI_Comm comm = q.ctx->levels->internal;
  const MPI_Datatype e = q.t.type;
  switch (q.coll) {
    case Coll::Allreduce:
      return PMPI_Iallreduce(in, chk, static_cast<int>(q.out_n), e, MPI_SUM, comm, &q.exact);
    case Coll::ReduceScatterBlock:
    case Coll::ReduceScatter:
      return PMPI_Ireduce_scatter(in, chk, q.icounts.data(), e, MPI_SUM, comm, &q.exact);
    case Coll::Allgather: {
      const int c = static_cast<int>(q.in_bytes / q.t.size);
      return PMPI_Iallgather(in, c, e, chk, c, e, comm, &q.exact);
    }
    default: break;
  }
  return MPI_ERR_INTERN;
}

// What each call (each start of a persistent request) does before its schedule runs, in the
// program's order of calls on every rank: takes the site's residual, samples the check
// (check_this_call) and, when sampled, saves the exact collective's input and starts it.
int begin(QuantCall& q, char* chk) {
  q.res = residual(q.site, q.s->residual * q.t.size);
  q.check = check_this_call(q.ctx, q.coll);
  if (!q.check) return MPI_SUCCESS;
  if (!q.in) {
    if (int rc = q.blocks->load(q.ctx->levels->rank, chk + q.in_off, q.in_bytes); rc != MPI_SUCCESS) return rc;
  } else if (q.copy_in) {
    std::memcpy(chk + q.in_off, q.in, static_cast<size_t>(q.in_bytes));
  }
  return start_exact(q, chk);
}

// What follows a successful run: the statistics, then the check's comparison (its exact
// collective waited for here if still outstanding: a request's completed with the request).
int finish(QuantCall& q, char* chk, bool request) {
  note_call(q.coll, q.bits, q.exact_bytes, q.sent_bytes, q.plan, request);
  if (!q.check) return MPI_SUCCESS;
  if (q.exact != MPI_REQUEST_NULL)
    if (int rc = PMPI_Wait(&q.exact, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) return rc;
  const char* got = q.recv;
  if (q.dense_off) {
    got = chk + q.dense_off;
    if (int rc = pack(q.recv, q.rcount * q.ctx->levels->size, q.rt, chk + q.dense_off); rc != MPI_SUCCESS) return rc;
  }
  note_check_elem(q.site, q.t.type, got, chk, q.out_n);
  return MPI_SUCCESS;
}

// The blocking call: q's schedule on the context's memory, reserved at the miss.
int run_blocking(QuantCall& q) {
  Context* ctx = q.ctx;
  char* mem = ctx->scratch.get(static_cast<size_t>(memory_bytes(*q.s, q.t, q.check_bytes)));
  if (!mem) return MPI_ERR_NO_MEM;
  char* chk = mem + check_at(*q.s, q.t);
  make_blocks(q);
  int rc = begin(q, chk);
  if (rc != MPI_SUCCESS) return rc;
  Binding b;
  bind(b, q, mem);
  b.tmp = &ctx->tmp;
  rc = run(*q.s, *ctx->levels, b);
  if (rc == MPI_SUCCESS) return finish(q, chk, false);
  if (q.exact != MPI_REQUEST_NULL) PMPI_Wait(&q.exact, MPI_STATUS_IGNORE);  // every rank started it
  return rc;
}

// The nonblocking call (persistent inside a PersistentInit scope): q's schedule as a request,
// on memory of its own in q's layout. begin() runs at every start (`before`): the residual is
// taken and held per start, the check's exact collective becomes a side request the request
// completes with; finish() runs at every successful completion (`after`).
int start_quant_request(std::unique_ptr<QuantCall> qp, MPI_Request* out) {
  std::shared_ptr<QuantCall> q(std::move(qp));
  auto r = std::make_unique<CollRequest>();
  r->coll = q->coll;
  r->ctx = q->ctx;
  r->sched = q->s;
  if (q->coll == Coll::Allgather) {  // the program may free its datatypes right after the call
    hold_type(*r, q->st);
    hold_type(*r, q->rt);
  }
  make_blocks(*q);
  char* mem = request_scratch(*r, memory_bytes(*q->s, q->t, q->check_bytes), &q->t);
  if (!mem) return MPI_ERR_NO_MEM;
  bind(r->b, *q, mem);
  char* chk = mem + check_at(*q->s, q->t);
  CollRequest* rp = r.get();  // the hooks are rp's: they never outlive it
  r->before = [rp, q, chk] {
    const int rc = begin(*q, chk);
    rp->b.residual = q->res.get();
    if (q->exact != MPI_REQUEST_NULL) {
      rp->side.push_back(q->exact);
      q->exact = MPI_REQUEST_NULL;
    }
    return rc;
  };
  r->after = [q, chk] { return finish(*q, chk, true); };
  return start_request(std::move(r), out);
}

// The form of the call, for TRACE.
const char* form(const MPI_Request* req) {
  return !req ? "" : persistent_init_scope() ? " (persistent)" : " (nonblocking)";
}

int run_or_start(std::unique_ptr<QuantCall> q, MPI_Request* req) {
  if (req) return start_quant_request(std::move(q), req);
  return run_blocking(*q);
}

}  // namespace

bool quant_f16(MPI_Datatype t) {
#if defined(MPIX_C_FLOAT16) && HIER_QUANT_F16
  return t == MPIX_C_FLOAT16;
#else
  (void)t;
  return false;
#endif
}

bool quant_elem(MPI_Datatype t) { return t == MPI_FLOAT || t == MPI_DOUBLE || quant_f16(t); }

int64_t quant_elem_size(MPI_Datatype t) { return t == MPI_FLOAT ? 4 : t == MPI_DOUBLE ? 8 : quant_f16(t) ? 2 : 1; }

diag::AlgoTag take_algo_tag() {
  const diag::AlgoTag t = g_tag;
  g_tag = diag::AlgoTag::Hier;
  return t;
}

int quant_bits(Coll coll, MPI_Datatype elem, MPI_Op op, int64_t values, const model::Plan& plan,
               const topo::Levels& lv) {
  if (!plan.quant_bits || config::get().quant_for(coll) == config::Quant::Off) return 0;
  if (coll != Coll::Allgather && op != MPI_SUM) return 0;
  if (!quant_elem(elem)) return 0;
  if (values < kb() * lv.size) return 0;  // the floor: one block per rank
  if (!lv.shape.cartesian || lv.shape.nlevels() != 2 || lv.node == MPI_COMM_NULL || lv.cross == MPI_COMM_NULL)
    return 0;
  return plan.quant_bits;
}

std::optional<int> quant_allreduce(Prepared& p, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                                   MPI_Op op, const TypeInfo& t, MPI_Request* req) {
  if (count <= 0) return std::nullopt;
  const topo::Levels& lv = *p.ctx->levels;
  if (!reduction_type(type)) return std::nullopt;
  const int bits = quant_bits(Coll::Allreduce, type, op, count, p.plan, lv);
  if (!bits) return std::nullopt;
  // Byte counts of the level collectives are ints: the whole records of the call must fit.
  if (qbytes(count, bits) > INT_MAX / 2) return std::nullopt;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const int64_t nbytes = int64_t{count} * t.size;
  const sched::QuantParams qp = params(p, bits, false);
  const int rank = lv.rank;
  // The check's memory: the exact result, and a copy of the input (in place).
  const int64_t check_bytes = check_bytes_if(2 * nbytes);
  const auto s = quant_schedule(p, quant_key(Coll::Allreduce, p, in_place, count, t, bits), t, check_bytes,
                                [&](int) { return sched::build_quant_allreduce(lv.shape, rank, count, in_place, qp); });
  if (!s) return std::nullopt;
  HIER_TRACE("exec", "rank %d: MPI_Allreduce%s of %d %s quantized %s, block %lld, across %d nodes of %d", lv.rank,
             form(req), count, elem_name(type), bits == 8 ? "int8" : "int4",
             static_cast<long long>(kb()), lv.shape.nnodes, lv.shape.dims[0]);
  auto q = new_call(Coll::Allreduce, bits, p, s, t, in_place ? recvbuf : sendbuf, count, check_bytes);
  q->send = static_cast<const char*>(sendbuf);
  q->recv = static_cast<char*>(recvbuf);
  // Values crossing nodes exactly: my shard but my piece once, my reduced piece to N - 1 nodes
  // (summed over the chunks of a pipelined schedule: each quantizes its shard and its piece).
  const int64_t piece_n = sched::count_of(*s, sched::Kind::DequantizeReduce);
  const int64_t shard_n = sched::count_of(*s, sched::Kind::Quantize) - piece_n;
  q->exact_bytes = ((shard_n - piece_n) + piece_n * (lv.shape.nnodes - 1)) * t.size;
  // The check: the exact result, through the MPI, of the input (a copy of it in place).
  q->in = in_place ? q->recv : q->send;
  q->copy_in = in_place;
  q->in_off = nbytes;
  q->in_bytes = nbytes;
  q->out_n = count;
  return run_or_start(std::move(q), req);
}

std::optional<int> quant_reduce_scatter(Prepared& p, Coll coll, const void* sendbuf, void* recvbuf,
                                        const std::vector<int64_t>& counts, MPI_Op op, const TypeInfo& t,
                                        MPI_Request* req) {
  const topo::Levels& lv = *p.ctx->levels;
  if (static_cast<int>(counts.size()) != lv.size) return std::nullopt;
  if (!reduction_type(t.type)) return std::nullopt;
  const MPI_Datatype elem = t.type;
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (total <= 0) return std::nullopt;
  const int bits = quant_bits(coll, elem, op, total, p.plan, lv);
  if (!bits) return std::nullopt;
  // Every byte count of the level collectives is an int.
  int64_t rec_total = 0;
  for (int64_t n : counts) rec_total += qbytes(n, bits);
  if (rec_total > INT_MAX / 2 || total * t.size > INT_MAX) return std::nullopt;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const bool block = coll == Coll::ReduceScatterBlock;
  sched::Key key = quant_key(coll, p, in_place, block ? counts[0] : total, t, bits);
  if (!block) key.counts = counts;
  const int64_t nbytes = total * t.size;
  const sched::QuantParams qp = params(p, bits, block);
  const int rank = lv.rank;
  // The check's memory: the exact result (my piece), and a copy of the input (in place).
  const int64_t check_bytes = check_bytes_if(2 * nbytes);
  const auto s = quant_schedule(p, key, t, check_bytes, [&](int) {
    return sched::build_quant_reduce_scatter(lv.shape, rank, counts, in_place, qp);
  });
  if (!s) return std::nullopt;
  const char* name = block ? "reduce_scatter_block" : "reduce_scatter";
  HIER_TRACE("exec", "rank %d: %s%s of %lld %s quantized %s, block %lld, across %d nodes of %d", lv.rank,
             name, form(req), static_cast<long long>(total), elem_name(elem),
             bits == 8 ? "int8" : "int4", static_cast<long long>(kb()), lv.shape.nnodes, lv.shape.dims[0]);
  const char* in = static_cast<const char*>(in_place ? recvbuf : sendbuf);
  auto q = new_call(coll, bits, p, s, t, in, total, check_bytes);
  q->send = static_cast<const char*>(sendbuf);
  q->recv = static_cast<char*>(recvbuf);
  // Values crossing nodes exactly: my node's partial sums of the other nodes' pieces.
  q->exact_bytes = (s->residual - counts[rank]) * t.size;
  q->in = in;
  q->copy_in = in_place;
  q->in_off = nbytes;
  q->in_bytes = nbytes;
  q->out_n = counts[rank];
  q->icounts.assign(counts.begin(), counts.end());
  return run_or_start(std::move(q), req);
}

std::optional<int> quant_allgather(Prepared& p, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                   void* recvbuf, int recvcount, const TypeInfo& rt, MPI_Request* req) {
  const topo::Levels& lv = *p.ctx->levels;
  if (recvcount <= 0) return std::nullopt;
  // Ranks may pass receive types of the same signature in different layouts (MPI_FLOAT x 2n here,
  // a contiguous type of 2 floats x n or a strided one there): everything below that ranks must
  // agree on (the decision, the key, the communication steps) reads the signature only, c values
  // of its element type per rank; a rank whose own layout is not dense packs (LoadBlock) and
  // unpacks (StoreBlock) its part through the datatype engine.
  const MPI_Datatype elem = dtype::signature_elem(rt.type);
  if (!quant_elem(elem)) return std::nullopt;
  const TypeInfo et = type_info(elem);
  const int64_t c = int64_t{recvcount} * rt.size / et.size;
  if (c > INT_MAX) return std::nullopt;
  const int bits = quant_bits(Coll::Allgather, elem, MPI_SUM, c * lv.size, p.plan, lv);
  if (!bits) return std::nullopt;
  if (int64_t{lv.size} * qbytes(c, bits) > INT_MAX / 2) return std::nullopt;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const int64_t mybytes = c * et.size, allbytes = mybytes * lv.size;
  char* recv = static_cast<char*>(recvbuf);
  const int64_t block_stride = int64_t{recvcount} * rt.extent;  // recvbuf's blocks, in this rank's layout
  const TypeInfo st = in_place ? rt : type_info(sendtype);
  const int64_t scount = in_place ? recvcount : sendcount;
  if (!st.ok || scount * st.size != mybytes) return std::nullopt;  // PMPI reports the mismatch
  const sched::QuantParams qp = params(p, bits, false);
  const int rank = lv.rank;
  // Two forms on this rank (its receive layout, not in the key, picks one): both built and
  // reserved at the miss. The check's memory: the exact result, my input, and the result as
  // dense values (a non-dense receive layout's, packed).
  const int64_t check_bytes = check_bytes_if(2 * allbytes + mybytes);
  const auto s = quant_schedule(
      p, quant_key(Coll::Allgather, p, false, c, et, bits), et, check_bytes,
      [&](int v) { return sched::build_quant_allgather(lv.shape, rank, c, v == 1, qp); }, rt.dense ? 0 : 1, true);
  if (!s) return std::nullopt;
  HIER_TRACE("exec", "rank %d: MPI_Allgather%s of %lld %s per rank quantized %s, block %lld, across %d nodes of %d",
             lv.rank, form(req), static_cast<long long>(c), elem_name(elem),
             bits == 8 ? "int8" : "int4", static_cast<long long>(kb()), lv.shape.nnodes, lv.shape.dims[0]);
  const char* src = in_place ? recv + lv.rank * block_stride : static_cast<const char*>(sendbuf);
  auto q = new_call(Coll::Allgather, bits, p, s, et, src, recvcount, check_bytes);
  q->recv = recv;  // the schedule reads my block through the blocks (LoadBlock), never `send`
  q->exact_bytes = mybytes * (lv.shape.nnodes - 1);
  q->st = st;
  q->rt = rt;
  q->src = src;
  q->scount = scount;
  q->rcount = recvcount;
  q->block_stride = block_stride;
  q->in = nullptr;  // my block, loaded (packed) through the blocks
  q->in_off = allbytes;
  q->in_bytes = mybytes;
  q->out_n = c * lv.size;
  q->dense_off = rt.dense ? 0 : allbytes + mybytes;
  return run_or_start(std::move(q), req);
}

}  // namespace hier::exec
