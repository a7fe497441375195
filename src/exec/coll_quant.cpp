// Quantized hierarchical collectives (ZeRO++ qgZ / qwZ idea; docs/quantization.md) on a
// cartesian 2-level shape of N nodes of L ranks, blocks of B values (quant/format.hpp).
// Allreduce:
//  1. exact reduce-scatter inside the node (PMPI_Reduce_scatter on levels.node), the shards cut
//     at block boundaries: my shard;
//  2. across nodes (levels.cross, rank = node index): the shard quantized once and cut into N
//     block-aligned pieces; piece j goes to cross rank j (PMPI_Alltoallv of the records); the N
//     received copies of my piece are dequantized and summed in one fixed order, node 0..N-1,
//     into a zeroed accumulator of the input type: my reduced piece;
//  3. the reduced piece quantized once, the records allgathered across nodes (PMPI_Allgatherv),
//     and every rank, the owner included, dequantizes all N pieces into its shard of the result;
//  4. exact allgather of the shards inside the node (PMPI_Allgatherv on levels.node).
// Every value of the result comes from the same records through the same kernel on every rank:
// the same bits everywhere. Error per element (docs/collectives.md): at most
// (sum over nodes of the scales of the piece's block)/2 from step 2, plus (scale of the reduced
// block)/2 from step 3, plus float rounding of the sums. A NaN or Inf in a block gives it a NaN
// scale (quant/format.hpp), which the sum and the requantization carry: the whole block of B
// values becomes NaN on every rank (Inf -> NaN, NaN stays NaN), never a number.
//
// Reduce_scatter(_block) (qgZ): the input permuted so that local index l's pieces (those of the
// ranks (m, l), m = 0..N-1) are contiguous, an exact reduce-scatter inside the node, each of
// the N pieces quantized once, an all-to-all across nodes, and the N copies of my piece summed
// in node order 0..N-1 straight into recvbuf. One quantization per element: the error is at
// most (sum over nodes of the scales of its block)/2.
// Allgather (qwZ): my block quantized once, its records allgathered across nodes, then the
// node's bundles allgathered inside the node (the records move unchanged: no requantization),
// and every rank, the source included, dequantizes all P records: the same bits everywhere,
// error at most (scale of the block)/2.
// Error feedback (HIER_QUANT_FEEDBACK) and the check (HIER_QUANT_CHECK): see quant_site below.
//
// Memory: the records, the accumulator and the shard live in the context's scratch, and the
// buffers of the direct level steps in ctx->tmp[0], reserved at the schedule-cache miss and
// agreed on (exec::schedule): nothing large is allocated once the ranks depend on each other
// (the count arrays, L and N ints, are made per call, as the executor's level steps do).
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

// Block range [first, first + n) cut into `parts` block ranges: part i starts at block
// first + i*n/parts. Returns the start of part i.
int64_t part_start(int64_t n, int parts, int i) { return n * i / parts; }

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

// Quantizes x[0, n) into rec. With a residual r (error feedback): x += r first, then r = x -
// deq(q(x)), the error this call made, carried into the next (a non-finite difference, from a
// block sent as NaN, is dropped: it must not poison later calls). x is scratch, never the user's.
template <class T>
void quantize_fb(T* x, int64_t n, int bits, char* rec, T* r) {
  if (n <= 0) return;
  if (r)
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] + r[i];
  quant::quantize(x, n, kb(), bits, rec);
  if (!r) return;
  quant::dequantize(rec, n, kb(), bits, r);
  for (int64_t i = 0; i < n; ++i) {
    const T e = x[i] - r[i];
    r[i] = std::isfinite(e) ? e : T(0);
  }
}

// Rank at (node m, local l) of a cartesian 2-level shape.
std::vector<int> grid(const topo::Levels& lv) {
  const int L = lv.shape.dims[0];
  std::vector<int> g(static_cast<size_t>(lv.size));
  for (int r = 0; r < lv.size; ++r) g[static_cast<size_t>(lv.shape.node_of[r] * L + lv.shape.local_of[r])] = r;
  return g;
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

// The schedule entry of a quantized call: its name (HIER_DEBUG=TRACE prints it) and, at the
// miss, the memory it needs, agreed on by every rank. Null: some rank failed, go exact.
std::shared_ptr<const sched::Schedule> quant_schedule(Prepared& p, const sched::Key& key, const char* coll, int bits,
                                      int64_t scratch, int64_t tmp0, int64_t check_bytes) {
  const std::string name = std::string(coll) + (bits == 8 ? "/quant-int8" : "/quant-int4");
  return schedule(p, key, [&](int) {
    sched::Schedule q;
    q.name = name;
    return q;
  }, [&](const sched::Schedule&) {
    return p.ctx->scratch.get(static_cast<size_t>(scratch)) != nullptr &&
           (tmp0 == 0 || p.ctx->tmp[0].get(static_cast<size_t>(tmp0)) != nullptr) &&
           (check_bytes == 0 || p.ctx->tmp[1].get(static_cast<size_t>(check_bytes)) != nullptr);
  });
}

int64_t check_bytes_if(int64_t bytes) { return config::get().quant_check_every > 0 ? bytes : 0; }

// The layout of one call on this rank: everything sized from (count, L, N, my position), so the
// same on every call with the same key.
struct Layout {
  int L = 0, N = 0, local = 0, node = 0, bits = 8;
  int64_t elem = 0;                // bytes per value
  int64_t shard_first = 0, shard_n = 0;  // my shard, in values
  int64_t piece_first = 0, piece_n = 0;  // my piece, in values from the shard's start
  // Scratch, byte offsets from its start.
  int64_t off_shard_rec = 0, off_recv_rec = 0, off_acc = 0, off_shard = 0, total = 0;
  // Level steps libhier runs itself where the exact schedule would (exec/executor.cpp's
  // use_direct_rs / use_padded_agv, the plan's thresholds): direct reduce-scatter inside the node,
  // padded allgathers (MPICH's Allgatherv is pathological for large pieces).
  bool rs_direct = false, agv3_padded = false, agv4_padded = false;

  Layout(const topo::Levels& lv, int64_t count, const TypeInfo& t, int qbits, const model::Plan& plan) {
    L = lv.shape.dims[0];
    N = lv.shape.nnodes;
    local = lv.my_local();
    node = lv.my_node();
    bits = qbits;
    elem = t.size;
    const int64_t nb = quant::num_blocks(count, kb());
    const int64_t b0 = part_start(nb, L, local), b1 = part_start(nb, L, local + 1);
    shard_first = std::min(b0 * kb(), count);
    shard_n = std::min(b1 * kb(), count) - shard_first;
    const int64_t sb = quant::num_blocks(shard_n, kb());
    const int64_t p0 = part_start(sb, N, node), p1 = part_start(sb, N, node + 1);
    piece_first = std::min(p0 * kb(), shard_n);
    piece_n = std::min(p1 * kb(), shard_n) - piece_first;
    off_shard_rec = 0;
    off_recv_rec = align64(quant::quantized_bytes(shard_n, kb(), bits));
    off_acc = off_recv_rec + align64(N * quant::quantized_bytes(piece_n, kb(), bits));
    off_shard = off_acc + align64(piece_n * elem);
    total = off_shard + shard_n * elem;
    rs_direct = use_direct_rs(plan.direct_rs_from, &t, true, count);
    agv3_padded = use_padded_agv(plan.padded_agv_from, nullptr, true, quant::quantized_bytes(shard_n, kb(), bits));
    agv4_padded = use_padded_agv(plan.padded_agv_from, &t, true, count);
  }
};

// The counts of the level collectives, in values (node) and record bytes (cross).
struct Counts {
  std::vector<int> node_counts, node_displs;  // L: shards
  std::vector<int> cross_counts, cross_displs;  // N: pieces of my shard, as records
  std::vector<int> piece_counts, piece_displs;  // N: my piece from each node, as records
  Counts(const Layout& g, int64_t count)
      : node_counts(g.L), node_displs(g.L), cross_counts(g.N), cross_displs(g.N), piece_counts(g.N), piece_displs(g.N) {
    const int64_t nb = quant::num_blocks(count, kb());
    for (int l = 0; l < g.L; ++l) {
      const int64_t f = std::min(part_start(nb, g.L, l) * kb(), count);
      node_counts[l] = static_cast<int>(std::min(part_start(nb, g.L, l + 1) * kb(), count) - f);
      node_displs[l] = static_cast<int>(f);
    }
    const int64_t sb = quant::num_blocks(g.shard_n, kb());
    for (int j = 0; j < g.N; ++j) {
      const int64_t b0 = part_start(sb, g.N, j), b1 = part_start(sb, g.N, j + 1);
      const int64_t f = std::min(b0 * kb(), g.shard_n), e = std::min(b1 * kb(), g.shard_n);
      cross_displs[j] = static_cast<int>(quant::record_offset(b0, kb(), g.bits));
      cross_counts[j] = static_cast<int>(quant::quantized_bytes(e - f, kb(), g.bits));
      piece_counts[j] = static_cast<int>(quant::quantized_bytes(g.piece_n, kb(), g.bits));
      piece_displs[j] = j * piece_counts[j];
    }
  }
};

// Bytes of ctx->tmp the direct steps take (0: none).
int64_t tmp_bytes(const Layout& g, const Counts& c, const TypeInfo& t) {
  int64_t b = 0;
  if (g.rs_direct) b = std::max(b, reduce_scatter_direct_bytes(c.node_counts, g.local, t));
  if (g.agv3_padded) b = std::max(b, allgatherv_padded_bytes(c.cross_counts, nullptr));
  if (g.agv4_padded) b = std::max(b, allgatherv_padded_bytes(c.node_counts, &t));
  return b;
}

template <class T>
int run_quant(const Layout& g, char* mem, const void* sendbuf, char* recv, int64_t count, const TypeInfo& t,
              const topo::Levels& lv, Scratch& tmp, T* r2, T* r3) {
  const MPI_Datatype type = t.type;
  const Counts c(g, count);
  char* shard_rec = mem + g.off_shard_rec;
  char* recv_rec = mem + g.off_recv_rec;
  T* acc = reinterpret_cast<T*>(mem + g.off_acc);
  // 1. Exact reduce-scatter inside the node: my shard (in place, MPI puts it at the start of
  //    recv; by direct exchange, in scratch).
  const bool in_place = sendbuf == MPI_IN_PLACE;
  T* shard;
  int err;
  if (g.rs_direct) {
    shard = reinterpret_cast<T*>(mem + g.off_shard);
    err = reduce_scatter_direct(in_place ? recv : static_cast<const char*>(sendbuf), reinterpret_cast<char*>(shard),
                                c.node_counts, t, MPI_SUM, lv.node, tmp);
  } else {
    shard = reinterpret_cast<T*>(in_place ? recv : recv + g.shard_first * g.elem);
    err = PMPI_Reduce_scatter(in_place ? MPI_IN_PLACE : sendbuf, shard, c.node_counts.data(), type, MPI_SUM, lv.node);
  }
  if (err != MPI_SUCCESS) return err;
  // 2. Quantize the shard once (pieces are block-aligned, so piece j's records are one byte
  //    range of the shard's), all-to-all across nodes, sum my piece in node order 0..N-1.
  const int64_t piece_bytes = quant::quantized_bytes(g.piece_n, kb(), g.bits);
  quantize_fb(shard, g.shard_n, g.bits, shard_rec, r2);
  err = PMPI_Alltoallv(shard_rec, c.cross_counts.data(), c.cross_displs.data(), MPI_BYTE, recv_rec, c.piece_counts.data(), c.piece_displs.data(), MPI_BYTE,
                       lv.cross);
  if (err != MPI_SUCCESS) return err;
  std::memset(static_cast<void*>(acc), 0, static_cast<size_t>(g.piece_n * g.elem));
  for (int j = 0; j < g.N; ++j) quant::dequantize_add(recv_rec + j * piece_bytes, g.piece_n, kb(), g.bits, acc);
  // 3. Requantize my reduced piece once, straight into its place among the shard's records, and
  //    allgather the records across nodes; everyone, the owner included, dequantizes the whole
  //    shard from the same records.
  quantize_fb(acc, g.piece_n, g.bits, shard_rec + c.cross_displs[g.node], r3);
  err = g.agv3_padded ? allgatherv_padded(nullptr, true, shard_rec, c.cross_counts, c.cross_displs, nullptr, lv.cross, tmp)
                      : PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, shard_rec, c.cross_counts.data(),
                                        c.cross_displs.data(), MPI_BYTE, lv.cross);
  if (err != MPI_SUCCESS) return err;
  quant::dequantize(shard_rec, g.shard_n, kb(), g.bits, reinterpret_cast<T*>(recv + g.shard_first * g.elem));
  // 4. Exact allgather of the shards inside the node.
  return g.agv4_padded ? allgatherv_padded(nullptr, true, recv, c.node_counts, c.node_displs, &t, lv.node, tmp)
                       : PMPI_Allgatherv(MPI_IN_PLACE, 0, type, recv, c.node_counts.data(), c.node_displs.data(), type,
                                         lv.node);
}


// ---- Reduce_scatter(_block) -----------------------------------------------------------------

struct RsLayout {
  int L = 0, N = 0, local = 0, node = 0, bits = 8;
  int64_t elem = 0, total = 0;
  std::vector<int> at;                      // (m, l) -> rank
  std::vector<int64_t> in_displs;           // rank -> first value of its piece in the input
  std::vector<int> node_counts;             // l -> values local index l reduces inside the node
  std::vector<int> cross_counts, cross_displs;  // m -> record bytes of piece (m, local) and their offset
  std::vector<int> recv_counts, recv_displs;    // m -> record bytes of my piece from node m
  int64_t mine_n = 0, my_count = 0;
  int64_t off_perm = 0, off_mine = 0, off_send = 0, off_recv = 0, bytes = 0;
  bool rs_direct = false;

  RsLayout(const topo::Levels& lv, const std::vector<int64_t>& counts, const TypeInfo& t, int qbits,
           const model::Plan& plan)
      : L(lv.shape.dims[0]), N(lv.shape.nnodes), local(lv.my_local()), node(lv.my_node()), bits(qbits), elem(t.size),
        at(grid(lv)), in_displs(counts.size()), node_counts(L), cross_counts(N), cross_displs(N), recv_counts(N),
        recv_displs(N) {
    for (size_t r = 0; r < counts.size(); ++r) {
      in_displs[r] = total;
      total += counts[r];
    }
    for (int l = 0; l < L; ++l)
      for (int m = 0; m < N; ++m) node_counts[l] += static_cast<int>(counts[at[m * L + l]]);
    my_count = counts[lv.rank];
    mine_n = node_counts[local];
    int64_t off = 0;
    for (int m = 0; m < N; ++m) {
      cross_displs[m] = static_cast<int>(off);
      cross_counts[m] = static_cast<int>(qbytes(counts[at[m * L + local]], bits));
      off += cross_counts[m];
      recv_counts[m] = static_cast<int>(qbytes(my_count, bits));
      recv_displs[m] = m * recv_counts[m];
    }
    off_perm = 0;
    off_mine = align64(total * elem);
    off_send = off_mine + align64(mine_n * elem);
    off_recv = off_send + align64(off);
    bytes = off_recv + N * qbytes(my_count, bits);
    rs_direct = use_direct_rs(plan.direct_rs_from, &t, true, total);
  }
};

template <class T>
int run_rs(const RsLayout& g, char* mem, const char* in, T* out, const std::vector<int64_t>& counts,
           const TypeInfo& t, const topo::Levels& lv, Scratch& tmp, T* res) {
  // 0. Permute: local index l's pieces, those of ranks (0, l), (1, l), ..., back to back.
  char* perm = mem + g.off_perm;
  int64_t o = 0;
  for (int l = 0; l < g.L; ++l)
    for (int m = 0; m < g.N; ++m) {
      const int r = g.at[m * g.L + l];
      std::memcpy(perm + o, in + g.in_displs[r] * g.elem, static_cast<size_t>(counts[r] * g.elem));
      o += counts[r] * g.elem;
    }
  // 1. Exact reduce-scatter inside the node: my N pieces, one per node.
  T* mine = reinterpret_cast<T*>(mem + g.off_mine);
  int err = g.rs_direct ? reduce_scatter_direct(perm, reinterpret_cast<char*>(mine), g.node_counts, t, MPI_SUM, lv.node, tmp)
                        : PMPI_Reduce_scatter(perm, mine, g.node_counts.data(), t.type, MPI_SUM, lv.node);
  if (err != MPI_SUCCESS) return err;
  // 2. Each piece quantized once (from its own first value: pieces are cut at block boundaries
  //    of their own), piece m to node m; the N copies of mine summed in node order into out.
  char* send = mem + g.off_send;
  char* recv = mem + g.off_recv;
  int64_t v = 0;
  for (int m = 0; m < g.N; ++m) {
    const int64_t n = counts[g.at[m * g.L + g.local]];
    quantize_fb(mine + v, n, g.bits, send + g.cross_displs[m], res ? res + v : nullptr);
    v += n;
  }
  err = PMPI_Alltoallv(send, g.cross_counts.data(), g.cross_displs.data(), MPI_BYTE, recv, g.recv_counts.data(),
                       g.recv_displs.data(), MPI_BYTE, lv.cross);
  if (err != MPI_SUCCESS) return err;
  std::memset(static_cast<void*>(out), 0, static_cast<size_t>(g.my_count * g.elem));
  for (int m = 0; m < g.N; ++m)
    if (g.my_count) quant::dequantize_add(recv + g.recv_displs[m], g.my_count, kb(), g.bits, out);
  return MPI_SUCCESS;
}

// ---- Allgather ------------------------------------------------------------------------------

struct AgLayout {
  int L = 0, N = 0, local = 0, node = 0, bits = 8;
  int64_t c = 0, elem = 0, qb = 0;
  std::vector<int> at;
  int64_t off_x = 0, off_my = 0, off_bundle = 0, off_all = 0, bytes = 0;
  AgLayout(const topo::Levels& lv, int64_t count, const TypeInfo& t, int qbits)
      : L(lv.shape.dims[0]), N(lv.shape.nnodes), local(lv.my_local()), node(lv.my_node()), bits(qbits), c(count),
        elem(t.size), qb(qbytes(count, qbits)), at(grid(lv)) {
    off_x = 0;
    off_my = align64(c * elem);
    off_bundle = off_my + align64(qb);
    off_all = off_bundle + align64(N * qb);
    bytes = off_all + int64_t{L} * N * qb;
  }
};

// Where the allgather's result goes: block r (c values) at base + r * stride, dense, or through
// `type` (count elements) from the staging `x` (c values) when the receive layout is not dense.
struct Unpack {
  char* base;
  int64_t stride;
  const TypeInfo* type;
  int64_t count;
  char* x;
};

template <class T>
int run_ag(const AgLayout& g, char* mem, const T* x, const Unpack& out, const topo::Levels& lv, T* res) {
  char* my = mem + g.off_my;
  char* bundle = mem + g.off_bundle;
  char* all = mem + g.off_all;
  // x is in scratch when there is a residual (quantize_fb adds to it), else the user's block.
  if (res) quantize_fb(const_cast<T*>(x), g.c, g.bits, my, res);
  else quant::quantize(x, g.c, kb(), g.bits, my);
  const int qb = static_cast<int>(g.qb);
  int err = PMPI_Allgather(my, qb, MPI_BYTE, bundle, qb, MPI_BYTE, lv.cross);  // bundle[m]: rank (m, local)
  if (err != MPI_SUCCESS) return err;
  err = PMPI_Allgather(bundle, g.N * qb, MPI_BYTE, all, g.N * qb, MPI_BYTE, lv.node);  // all[l][m]
  if (err != MPI_SUCCESS) return err;
  for (int l = 0; l < g.L; ++l)
    for (int m = 0; m < g.N; ++m) {
      const char* rec = all + (int64_t{l} * g.N + m) * g.qb;
      char* dst = out.base + g.at[m * g.L + l] * out.stride;
      if (!out.type) {
        quant::dequantize(rec, g.c, kb(), g.bits, reinterpret_cast<T*>(dst));
        continue;
      }
      quant::dequantize(rec, g.c, kb(), g.bits, reinterpret_cast<T*>(out.x));
      if (int rc = unpack(out.x, out.count, *out.type, dst); rc != MPI_SUCCESS) return rc;
    }
  return MPI_SUCCESS;
}

// Whether a reduction's datatype may run quantized: the predefined MPI_FLOAT / MPI_DOUBLE (the
// handle). The standard asks for the same datatype on every rank of a reduction, and both MPIs
// reject MPI_SUM on a derived datatype, a duplicate of MPI_FLOAT included (MPI_ERR_OP: Open MPI
// 4.1, MPICH 4.0), so no correct program passes MPI_FLOAT on one rank and an equivalent derived
// type on another, and such a call still fails as with the MPI alone.
bool reduction_type(MPI_Datatype type) { return type == MPI_FLOAT || type == MPI_DOUBLE; }

}  // namespace

diag::AlgoTag take_algo_tag() {
  const diag::AlgoTag t = g_tag;
  g_tag = diag::AlgoTag::Hier;
  return t;
}

int quant_bits(Coll coll, MPI_Datatype elem, MPI_Op op, int64_t values, const model::Plan& plan,
               const topo::Levels& lv) {
  if (!plan.quant_bits || config::get().quant_for(coll) == config::Quant::Off) return 0;
  if (coll != Coll::Allgather && op != MPI_SUM) return 0;
  if (elem != MPI_FLOAT && elem != MPI_DOUBLE) return 0;
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
  const Layout g(lv, count, t, bits, p.plan);
  // Byte counts of the level collectives are ints: the whole records of the call must fit.
  if (qbytes(count, bits) > INT_MAX / 2) return std::nullopt;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const int64_t nbytes = int64_t{count} * t.size;
  const auto s =
      quant_schedule(p, quant_key(Coll::Allreduce, p, in_place, count, t, bits), "allreduce", bits, g.total,
                     tmp_bytes(g, Counts(g, count), t), check_bytes_if(2 * nbytes));
  if (!s) return std::nullopt;
  char* mem = p.ctx->scratch.get(static_cast<size_t>(g.total));  // reserved above: allocates nothing
  if (!mem) return MPI_ERR_NO_MEM;
  HIER_TRACE("exec", "rank %d: MPI_Allreduce of %d %s quantized %s, block %lld, %d pieces across %d nodes of %d",
             lv.rank, count, type == MPI_FLOAT ? "float" : "double", bits == 8 ? "int8" : "int4",
             static_cast<long long>(kb()), g.N, g.N, g.L);
  g_tag = bits == 8 ? diag::AlgoTag::HierInt8 : diag::AlgoTag::HierInt4;
  char* recv = static_cast<char*>(recvbuf);
  const Site site{p.ctx, Coll::Allreduce, in_place ? recvbuf : sendbuf, count};
  // The check: the exact result, through the MPI, of a copy of the input.
  const bool check = check_this_call(p.ctx, Coll::Allreduce);
  char* chk = check ? p.ctx->tmp[1].get(static_cast<size_t>(2 * nbytes)) : nullptr;
  if (check && in_place) std::memcpy(chk + nbytes, recv, static_cast<size_t>(nbytes));
  char* r = residual(site, (g.shard_n + g.piece_n) * g.elem);
  int rc;
  if (type == MPI_FLOAT) {
    float* rf = reinterpret_cast<float*>(r);
    rc = run_quant<float>(g, mem, sendbuf, recv, count, t, lv, p.ctx->tmp[0], rf, rf ? rf + g.shard_n : nullptr);
  } else {
    double* rd = reinterpret_cast<double*>(r);
    rc = run_quant<double>(g, mem, sendbuf, recv, count, t, lv, p.ctx->tmp[0], rd, rd ? rd + g.shard_n : nullptr);
  }
  if (rc != MPI_SUCCESS) return rc;
  const int64_t cross_values = (g.shard_n - g.piece_n) + g.piece_n * (g.N - 1);
  const Counts c(g, count);
  int64_t sent = 0;
  for (int j = 0; j < g.N; ++j)
    if (j != g.node) sent += c.cross_counts[j];
  sent += int64_t{c.cross_counts[g.node]} * (g.N - 1);
  note_call(Coll::Allreduce, bits, cross_values * g.elem, sent, p.plan);
  if (check) {
    rc = PMPI_Allreduce(in_place ? chk + nbytes : sendbuf, chk, count, type, MPI_SUM, p.ctx->comm);
    if (rc != MPI_SUCCESS) return rc;
    if (type == MPI_FLOAT) note_check(site, reinterpret_cast<float*>(recv), reinterpret_cast<float*>(chk), count);
    else note_check(site, reinterpret_cast<double*>(recv), reinterpret_cast<double*>(chk), count);
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
  const RsLayout g(lv, counts, t, bits, p.plan);
  // Every byte count of the level collectives is an int.
  int64_t rec_total = 0;
  for (int64_t n : counts) rec_total += qbytes(n, bits);
  if (rec_total > INT_MAX / 2 || total * t.size > INT_MAX) return std::nullopt;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  sched::Key key = quant_key(coll, p, in_place, coll == Coll::ReduceScatterBlock ? counts[0] : total, t, bits);
  if (coll != Coll::ReduceScatterBlock) key.counts = counts;
  const int64_t nbytes = total * t.size;
  const int64_t tmp0 = g.rs_direct ? reduce_scatter_direct_bytes(g.node_counts, g.local, t) : 0;
  const char* name = coll == Coll::ReduceScatterBlock ? "reduce_scatter_block" : "reduce_scatter";
  const auto s = quant_schedule(p, key, name, bits, g.bytes, tmp0, check_bytes_if(2 * nbytes));
  if (!s) return std::nullopt;
  char* mem = p.ctx->scratch.get(static_cast<size_t>(g.bytes));
  if (!mem) return MPI_ERR_NO_MEM;
  HIER_TRACE("exec", "rank %d: %s of %lld %s quantized %s, block %lld, across %d nodes of %d", lv.rank, name,
             static_cast<long long>(total), t.type == MPI_FLOAT ? "float" : "double", bits == 8 ? "int8" : "int4",
             static_cast<long long>(kb()), g.N, g.L);
  g_tag = bits == 8 ? diag::AlgoTag::HierInt8 : diag::AlgoTag::HierInt4;
  const char* in = static_cast<const char*>(in_place ? recvbuf : sendbuf);
  const Site site{p.ctx, coll, in, total};
  const bool check = check_this_call(p.ctx, coll);
  char* chk = check ? p.ctx->tmp[1].get(static_cast<size_t>(2 * nbytes)) : nullptr;
  if (check) std::memcpy(chk + nbytes, in, static_cast<size_t>(nbytes));  // the input, recvbuf's in place
  char* r = residual(site, g.mine_n * g.elem);
  int rc = t.type == MPI_FLOAT
               ? run_rs<float>(g, mem, in, static_cast<float*>(recvbuf), counts, t, lv, p.ctx->tmp[0], reinterpret_cast<float*>(r))
               : run_rs<double>(g, mem, in, static_cast<double*>(recvbuf), counts, t, lv, p.ctx->tmp[0], reinterpret_cast<double*>(r));
  if (rc != MPI_SUCCESS) return rc;
  note_call(coll, bits, (g.mine_n - counts[g.at[g.node * g.L + g.local]]) * g.elem,
            std::accumulate(g.cross_counts.begin(), g.cross_counts.end(), int64_t{0}) - g.cross_counts[g.node], p.plan);
  if (check) {
    std::vector<int> rc_counts(counts.begin(), counts.end());
    rc = PMPI_Reduce_scatter(chk + nbytes, chk, rc_counts.data(), t.type, MPI_SUM, p.ctx->comm);
    if (rc != MPI_SUCCESS) return rc;
    if (t.type == MPI_FLOAT) note_check(site, static_cast<float*>(recvbuf), reinterpret_cast<float*>(chk), g.my_count);
    else note_check(site, static_cast<double*>(recvbuf), reinterpret_cast<double*>(chk), g.my_count);
  }
  return MPI_SUCCESS;
}

std::optional<int> quant_allgather(Prepared& p, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                   void* recvbuf, int recvcount, const TypeInfo& rt) {
  const topo::Levels& lv = *p.ctx->levels;
  if (recvcount <= 0) return std::nullopt;
  // Ranks may pass receive types of the same signature in different layouts (MPI_FLOAT x 2n here,
  // a contiguous type of 2 floats x n or a strided one there): everything below that ranks must
  // agree on (the decision, the key, the layout in scratch) reads the signature only, c values of
  // its element type per rank; a rank whose own layout is not dense packs and unpacks its part.
  const MPI_Datatype elem = dtype::signature_elem(rt.type);
  if (elem != MPI_FLOAT && elem != MPI_DOUBLE) return std::nullopt;
  const TypeInfo et = type_info(elem);
  const int64_t c = int64_t{recvcount} * rt.size / et.size;
  if (c > INT_MAX) return std::nullopt;
  const int bits = quant_bits(Coll::Allgather, elem, MPI_SUM, c * lv.size, p.plan, lv);
  if (!bits) return std::nullopt;
  const AgLayout g(lv, c, et, bits);
  if (int64_t{lv.size} * g.qb > INT_MAX / 2) return std::nullopt;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const int64_t mybytes = g.c * g.elem, allbytes = mybytes * lv.size;
  // The check's memory: the exact result, my input, and the result as dense values (a non-dense
  // receive type's, packed): reserved whatever this rank's layout, which is not in the key.
  const auto s = quant_schedule(p, quant_key(Coll::Allgather, p, false, c, et, bits), "allgather",
                                            bits, g.bytes, 0, check_bytes_if(2 * allbytes + mybytes));
  if (!s) return std::nullopt;
  char* mem = p.ctx->scratch.get(static_cast<size_t>(g.bytes));
  if (!mem) return MPI_ERR_NO_MEM;
  // My block as c dense values: the user's buffer (my block of recvbuf in place) where its type
  // is dense, else packed into scratch (x, reserved on every rank: the layout is not in the key).
  char* recv = static_cast<char*>(recvbuf);
  const int64_t block_stride = int64_t{recvcount} * rt.extent;  // recvbuf's blocks, in this rank's layout
  const TypeInfo st = in_place ? rt : type_info(sendtype);
  const int64_t scount = in_place ? recvcount : sendcount;
  const char* src = in_place ? recv + lv.rank * block_stride : static_cast<const char*>(sendbuf);
  if (!st.ok || scount * st.size != mybytes) return MPI_ERR_TYPE;  // every rank got here: report it
  char* x = mem + g.off_x;
  bool src_in_x = false;
  if (!st.dense) {
    if (int rc = pack(src, scount, st, x); rc != MPI_SUCCESS) return rc;
    src_in_x = true;
  }
  HIER_TRACE("exec", "rank %d: MPI_Allgather of %lld %s per rank quantized %s, block %lld, across %d nodes of %d",
             lv.rank, static_cast<long long>(c), elem == MPI_FLOAT ? "float" : "double", bits == 8 ? "int8" : "int4",
             static_cast<long long>(kb()), g.N, g.L);
  g_tag = bits == 8 ? diag::AlgoTag::HierInt8 : diag::AlgoTag::HierInt4;
  const Site site{p.ctx, Coll::Allgather, src, recvcount};
  const bool check = check_this_call(p.ctx, Coll::Allgather);
  char* chk = check ? p.ctx->tmp[1].get(static_cast<size_t>(2 * allbytes + mybytes)) : nullptr;
  if (check) std::memcpy(chk + allbytes, src_in_x ? x : src, static_cast<size_t>(mybytes));
  char* r = residual(site, mybytes);
  if (r && !src_in_x) std::memcpy(x, src, static_cast<size_t>(mybytes));  // feedback adds to a copy
  const char* q = r || src_in_x ? x : src;
  // A non-dense receive type: each block dequantized into x (free again once my records are
  // made) and unpacked into its place.
  const Unpack out{recv, block_stride, rt.dense ? nullptr : &rt, recvcount, x};
  int rc = elem == MPI_FLOAT
               ? run_ag<float>(g, mem, reinterpret_cast<const float*>(q), out, lv, reinterpret_cast<float*>(r))
               : run_ag<double>(g, mem, reinterpret_cast<const double*>(q), out, lv, reinterpret_cast<double*>(r));
  if (rc != MPI_SUCCESS) return rc;
  note_call(Coll::Allgather, bits, mybytes * (g.N - 1), g.qb * (g.N - 1), p.plan);
  if (check) {
    rc = PMPI_Allgather(chk + allbytes, static_cast<int>(c), elem, chk, static_cast<int>(c), elem, p.ctx->comm);
    if (rc != MPI_SUCCESS) return rc;
    const int64_t n = c * lv.size;
    const char* got = recv;
    if (!rt.dense) {
      got = chk + allbytes + mybytes;
      if ((rc = pack(recv, int64_t{recvcount} * lv.size, rt, chk + allbytes + mybytes)) != MPI_SUCCESS) return rc;
    }
    if (elem == MPI_FLOAT) note_check(site, reinterpret_cast<const float*>(got), reinterpret_cast<float*>(chk), n);
    else note_check(site, reinterpret_cast<const double*>(got), reinterpret_cast<double*>(chk), n);
  }
  return MPI_SUCCESS;
}

}  // namespace hier::exec
