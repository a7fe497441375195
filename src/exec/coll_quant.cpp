// Quantized hierarchical collectives (ZeRO++ qgZ / qwZ idea; docs/quantization.md): the entry
// points of MPI_Allreduce, MPI_Reduce_scatter(_block) and MPI_Allgather under HIER_QUANT. The
// algorithms are schedules (sched/build_quant.cpp: Quantize, Alltoallv of records,
// DequantizeReduce in one fixed node order, Dequantize, ...), run by the executor
// (exec/executor.cpp) like every other schedule and printed by HIER_DEBUG=TRACE at the
// schedule-cache miss. Here: the decision (from the type signature and what every rank shares),
// the schedule key, the memory reserved and agreed on at the miss (scratch values, records, the
// direct level steps' buffers, the check's copies: nothing large is allocated once the ranks
// depend on each other), error feedback (HIER_QUANT_FEEDBACK: the call site's residual, bound to
// the run), the check (HIER_QUANT_CHECK) and the report's "quantization" section.
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

struct Residual {
  std::unique_ptr<char[]> mem;
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

void note_call(Coll c, int bits, int64_t exact_bytes, int64_t sent_bytes, const model::Plan& plan) {
  register_report();
  std::lock_guard<std::mutex> lk(g_mu);
  CollStats& st = g_stats[c];
  ++st.calls;
  ++(bits == 8 ? st.int8 : st.int4);
  st.cross_exact += static_cast<uint64_t>(exact_bytes);
  st.cross_sent += static_cast<uint64_t>(sent_bytes);
  st.quant_ns += plan.quant_ns;
  st.exact_ns += plan.algo == sched::Algorithm::Flat ? plan.flat_ns : plan.hier_ns;
}

// The residual of a call site (`bytes` long, zero at first), or null: feedback off, or the cap
// reached. Purely local: whether a rank has one changes only the values it quantizes, never
// what any rank sends or receives, so ranks need not agree on it.
char* residual(const Site& site, int64_t bytes) {
  const int64_t cap = config::get().quant_feedback_cap;
  if (cap <= 0 || bytes <= 0) return nullptr;
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_residuals.find(site);
  if (it != g_residuals.end() && it->second.bytes == bytes) {
    ++g_feedback_calls;
    return it->second.mem.get();
  }
  const int64_t freed = it != g_residuals.end() ? it->second.bytes : 0;
  if (g_residual_bytes - freed + bytes > cap) {
    ++g_residual_refused;
    return nullptr;
  }
  std::unique_ptr<char[]> mem(new (std::nothrow) char[static_cast<size_t>(bytes)]);
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
  return r.mem.get();
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
  sched::Key key{static_cast<uint8_t>(c), p.plan.algo, in_place, false, -1, n, {}, 1};
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
  return q;
}

// Scratch bytes of a quantized schedule on values of `t`: its values, then its records.
int64_t records_at(const sched::Schedule& s, const TypeInfo& t) { return align64(s.scratch * t.size); }
int64_t scratch_bytes(const sched::Schedule& s, const TypeInfo& t) { return records_at(s, t) + s.records; }

// The schedule of a quantized call (HIER_DEBUG=TRACE prints it at the miss) and, at the miss,
// the memory it needs, agreed on by every rank: its scratch and records, the direct level steps'
// buffers (exec::reserve) and the check's copies. Null: some rank failed, go exact.
std::shared_ptr<const sched::Schedule> quant_schedule(Prepared& p, const sched::Key& key, const TypeInfo& t,
                                                      int64_t check_bytes, const Build& build, int variant = 0,
                                                      bool both = false) {
  return schedule(p, key, build, [&](const sched::Schedule& s) {
    return p.ctx->scratch.get(static_cast<size_t>(scratch_bytes(s, t))) != nullptr &&
           reserve(s, *p.ctx->levels, &t, &p.ctx->tmp) &&
           (check_bytes == 0 || p.ctx->tmp[1].get(static_cast<size_t>(check_bytes)) != nullptr);
  }, variant, both);
}

int64_t check_bytes_if(int64_t bytes) { return config::get().quant_check_every > 0 ? bytes : 0; }

// Runs the quantized schedule `s` on this call's buffers (values of `t`), with the call site's
// residual (null: no error feedback) and, for the allgather, the user's blocks.
int run_quant(Prepared& p, const sched::Schedule& s, const char* send, char* recv, const TypeInfo& t, char* residual,
              Blocks* blocks) {
  char* mem = p.ctx->scratch.get(static_cast<size_t>(scratch_bytes(s, t)));  // reserved at the miss
  if (!mem) return MPI_ERR_NO_MEM;
  Binding b;
  b.send = send;
  b.recv = recv;
  b.scratch = mem;
  b.records = mem + records_at(s, t);
  b.stride = t.size;
  b.type = t.type;
  b.op = MPI_SUM;
  b.info = &t;
  b.blocks = blocks;
  b.tmp = &p.ctx->tmp;
  b.residual = residual;
  return run(s, *p.ctx->levels, b);
}

// The first step of kind `k` (the builders put one there).
const sched::Step& first_of(const sched::Schedule& s, sched::Kind k) {
  static const sched::Step none;
  for (const sched::Step& st : s.steps)
    if (st.kind == k) return st;
  return none;
}

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
                                   MPI_Op op, const TypeInfo& t) {
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
  const auto s = quant_schedule(p, quant_key(Coll::Allreduce, p, in_place, count, t, bits), t, check_bytes_if(2 * nbytes),
                                [&](int) { return sched::build_quant_allreduce(lv.shape, rank, count, in_place, qp); });
  if (!s) return std::nullopt;
  HIER_TRACE("exec", "rank %d: MPI_Allreduce of %d %s quantized %s, block %lld, across %d nodes of %d", lv.rank, count,
             elem_name(type), bits == 8 ? "int8" : "int4", static_cast<long long>(kb()),
             lv.shape.nnodes, lv.shape.dims[0]);
  g_tag = bits == 8 ? diag::AlgoTag::HierInt8 : diag::AlgoTag::HierInt4;
  char* recv = static_cast<char*>(recvbuf);
  const Site site{p.ctx, Coll::Allreduce, in_place ? recvbuf : sendbuf, count};
  // The check: the exact result, through the MPI, of a copy of the input.
  const bool check = check_this_call(p.ctx, Coll::Allreduce);
  char* chk = check ? p.ctx->tmp[1].get(static_cast<size_t>(2 * nbytes)) : nullptr;
  if (check && in_place) std::memcpy(chk + nbytes, recv, static_cast<size_t>(nbytes));
  char* r = residual(site, s->residual * t.size);
  int rc = run_quant(p, *s, static_cast<const char*>(sendbuf), recv, t, r, nullptr);
  if (rc != MPI_SUCCESS) return rc;
  // Values crossing nodes exactly: my shard but my piece once, my reduced piece to N - 1 nodes.
  const int64_t shard_n = first_of(*s, sched::Kind::Quantize).count;
  const int64_t piece_n = first_of(*s, sched::Kind::DequantizeReduce).count;
  note_call(Coll::Allreduce, bits, ((shard_n - piece_n) + piece_n * (lv.shape.nnodes - 1)) * t.size,
            cross_bytes_sent(*s, lv), p.plan);
  if (check) {
    rc = PMPI_Allreduce(in_place ? chk + nbytes : sendbuf, chk, count, type, MPI_SUM, p.ctx->comm);
    if (rc != MPI_SUCCESS) return rc;
    note_check_elem(site, type, recv, chk, count);
  }
  return MPI_SUCCESS;
}

std::optional<int> quant_reduce_scatter(Prepared& p, Coll coll, const void* sendbuf, void* recvbuf,
                                        const std::vector<int64_t>& counts, MPI_Op op, const TypeInfo& t) {
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
  const auto s = quant_schedule(p, key, t, check_bytes_if(2 * nbytes), [&](int) {
    return sched::build_quant_reduce_scatter(lv.shape, rank, counts, in_place, qp);
  });
  if (!s) return std::nullopt;
  const char* name = block ? "reduce_scatter_block" : "reduce_scatter";
  HIER_TRACE("exec", "rank %d: %s of %lld %s quantized %s, block %lld, across %d nodes of %d", lv.rank, name,
             static_cast<long long>(total), elem_name(elem), bits == 8 ? "int8" : "int4",
             static_cast<long long>(kb()), lv.shape.nnodes, lv.shape.dims[0]);
  g_tag = bits == 8 ? diag::AlgoTag::HierInt8 : diag::AlgoTag::HierInt4;
  const char* in = static_cast<const char*>(in_place ? recvbuf : sendbuf);
  const Site site{p.ctx, coll, in, total};
  const bool check = check_this_call(p.ctx, coll);
  char* chk = check ? p.ctx->tmp[1].get(static_cast<size_t>(2 * nbytes)) : nullptr;
  if (check) std::memcpy(chk + nbytes, in, static_cast<size_t>(nbytes));  // the input, recvbuf's in place
  char* r = residual(site, s->residual * t.size);
  int rc = run_quant(p, *s, static_cast<const char*>(sendbuf), static_cast<char*>(recvbuf), t, r, nullptr);
  if (rc != MPI_SUCCESS) return rc;
  // Values crossing nodes exactly: my node's partial sums of the other nodes' pieces.
  note_call(coll, bits, (s->residual - counts[rank]) * t.size, cross_bytes_sent(*s, lv), p.plan);
  if (check) {
    std::vector<int> rc_counts(counts.begin(), counts.end());
    rc = PMPI_Reduce_scatter(chk + nbytes, chk, rc_counts.data(), elem, MPI_SUM, p.ctx->comm);
    if (rc != MPI_SUCCESS) return rc;
    note_check_elem(site, elem, recvbuf, chk, counts[rank]);
  }
  return MPI_SUCCESS;
}

std::optional<int> quant_allgather(Prepared& p, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                   void* recvbuf, int recvcount, const TypeInfo& rt) {
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
  const auto s = quant_schedule(
      p, quant_key(Coll::Allgather, p, false, c, et, bits), et, check_bytes_if(2 * allbytes + mybytes),
      [&](int v) { return sched::build_quant_allgather(lv.shape, rank, c, v == 1, qp); }, rt.dense ? 0 : 1, true);
  if (!s) return std::nullopt;
  HIER_TRACE("exec", "rank %d: MPI_Allgather of %lld %s per rank quantized %s, block %lld, across %d nodes of %d",
             lv.rank, static_cast<long long>(c), elem_name(elem), bits == 8 ? "int8" : "int4",
             static_cast<long long>(kb()), lv.shape.nnodes, lv.shape.dims[0]);
  g_tag = bits == 8 ? diag::AlgoTag::HierInt8 : diag::AlgoTag::HierInt4;
  const char* src = in_place ? recv + lv.rank * block_stride : static_cast<const char*>(sendbuf);
  AgBlocks blocks(src, scount, st, recv, block_stride, recvcount, rt);
  const Site site{p.ctx, Coll::Allgather, src, recvcount};
  const bool check = check_this_call(p.ctx, Coll::Allgather);
  char* chk = check ? p.ctx->tmp[1].get(static_cast<size_t>(2 * allbytes + mybytes)) : nullptr;
  int rc = MPI_SUCCESS;
  if (check && (rc = blocks.load(lv.rank, chk + allbytes, mybytes)) != MPI_SUCCESS) return rc;
  char* r = residual(site, s->residual * et.size);
  rc = run_quant(p, *s, nullptr, recv, et, r, &blocks);
  if (rc != MPI_SUCCESS) return rc;
  note_call(Coll::Allgather, bits, mybytes * (lv.shape.nnodes - 1), cross_bytes_sent(*s, lv), p.plan);
  if (check) {
    rc = PMPI_Allgather(chk + allbytes, static_cast<int>(c), elem, chk, static_cast<int>(c), elem, p.ctx->comm);
    if (rc != MPI_SUCCESS) return rc;
    const int64_t n = c * lv.size;
    const char* got = recv;
    if (!rt.dense) {
      got = chk + allbytes + mybytes;
      if ((rc = pack(recv, int64_t{recvcount} * lv.size, rt, chk + allbytes + mybytes)) != MPI_SUCCESS) return rc;
    }
    note_check_elem(site, elem, got, chk, n);
  }
  return MPI_SUCCESS;
}

}  // namespace hier::exec
