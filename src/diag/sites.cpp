// Per-call-site timing (hot path: a per-thread table of plain counters), the running signature
// of the collectives on MPI_COMM_WORLD, and the finalize exchange that turns them into the
// report's `call_sites`, `stragglers` and `collective_check` sections (docs/diagnostics.md).
#include "diag/sites.hpp"

#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "base/hooks.hpp"
#include "diag/log.hpp"
#include "diag/ranks_text.hpp"
#include "diag/c4_class.hpp"
#include "diag/straggler.hpp"
#include "diag/where.hpp"
#include "hier/fn.hpp"
#include "util/fnv.hpp"

namespace hier::diag {

bool g_diag_on = false;

namespace {

constexpr int kWin = 32;            // durations kept per site: the last kWin calls
constexpr int kTableSlots = 256;    // call sites per thread (a power of two)
constexpr int kProbe = 16;          // slots tried before a site counts as dropped
constexpr int kRing = 16;           // signatures of the last collectives on MPI_COMM_WORLD
constexpr int kMaxSendSites = 32;   // call sites per rank compared at finalize
constexpr size_t kRootBudget = 64u << 20;  // bytes rank 0 may receive at finalize

// ---- hot path state ---------------------------------------------------------------------------
// One writer per table (its thread): load + store, no locked instruction. Relaxed atomics so that
// the finalize reader is well defined.
struct SiteEntry {
  std::atomic<const void*> ra{nullptr};
  std::atomic<int> fn{-1};  // -1: free slot
  std::atomic<uint64_t> calls{0}, bytes{0}, total_ns{0}, min_ns{UINT64_MAX}, max_ns{0};
  std::atomic<float> win[kWin] = {};  // call i's duration (ns) at win[i % kWin]
};

struct SiteTable {
  SiteEntry e[kTableSlots];
  std::atomic<uint64_t> dropped{0};  // calls at sites beyond this table's capacity
  SiteTable* next = nullptr;
};

std::atomic<SiteTable*> g_tables{nullptr};  // every thread's table; pushed, never popped
thread_local SiteTable* tl_sites __attribute__((tls_model("initial-exec"))) = nullptr;

struct WorldSeq {
  std::atomic<uint64_t> n{0}, hash{0};
  std::atomic<uint64_t> ring[kRing] = {};  // signature of collective #k at ring[k % kRing]
};
WorldSeq g_world;

inline void bump(std::atomic<uint64_t>& a, uint64_t v) {
  a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

inline uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no system call
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Collectives whose message size (the report's bytes) is the same on every rank of a correct
// program: it enters their signature (interposer/api.txt's flag agree).
bool bytes_agree(Fn b) { return kFnBytesAgree[static_cast<int>(b)]; }

uint64_t signature(int fn, int root, uint64_t bytes) {
  const Fn b = base_of(static_cast<Fn>(fn));
  const uint64_t by = bytes_agree(b) ? (bytes & 0xffffffffull) : 0;
  return (static_cast<uint64_t>(static_cast<uint16_t>(b)) << 48) ^
         (static_cast<uint64_t>(static_cast<uint16_t>(root + 1)) << 32) ^ by;
}

SiteTable* new_table() noexcept {
  auto* t = new (std::nothrow) SiteTable();
  if (!t) return nullptr;
  t->next = g_tables.load(std::memory_order_relaxed);
  while (!g_tables.compare_exchange_weak(t->next, t, std::memory_order_release, std::memory_order_relaxed)) {
  }
  tl_sites = t;
  return t;
}

void record_site(int fn, const void* ra, uint64_t bytes, uint64_t dt) noexcept {
  SiteTable* t = tl_sites;
  if (!t && !(t = new_table())) return;
  const uint64_t h = mix(reinterpret_cast<uintptr_t>(ra) ^ (static_cast<uint64_t>(fn) << 52));
  for (int p = 0; p < kProbe; ++p) {
    SiteEntry& e = t->e[(h + static_cast<uint64_t>(p)) & (kTableSlots - 1)];
    const int f = e.fn.load(std::memory_order_relaxed);
    if (f == -1) {
      e.ra.store(ra, std::memory_order_relaxed);
      e.fn.store(fn, std::memory_order_release);
    } else if (f != fn || e.ra.load(std::memory_order_relaxed) != ra) {
      continue;
    }
    const uint64_t c = e.calls.load(std::memory_order_relaxed);
    e.win[c % kWin].store(static_cast<float>(dt), std::memory_order_relaxed);
    e.calls.store(c + 1, std::memory_order_relaxed);
    if (bytes) bump(e.bytes, bytes);
    bump(e.total_ns, dt);
    if (dt < e.min_ns.load(std::memory_order_relaxed)) e.min_ns.store(dt, std::memory_order_relaxed);
    if (dt > e.max_ns.load(std::memory_order_relaxed)) e.max_ns.store(dt, std::memory_order_relaxed);
    return;
  }
  bump(t->dropped, 1);
}

void record_world(int fn, int root, uint64_t bytes) noexcept {
  const uint64_t s = signature(fn, root, bytes);
  const uint64_t n = g_world.n.load(std::memory_order_relaxed) + 1;
  g_world.ring[n % kRing].store(s, std::memory_order_relaxed);
  g_world.hash.store(mix(g_world.hash.load(std::memory_order_relaxed) ^ s), std::memory_order_relaxed);
  g_world.n.store(n, std::memory_order_relaxed);
}

}  // namespace

void DiagScope::begin(int fn, MPI_Comm comm, int64_t count, int root, const void* ra) noexcept {
  on_ = true;
  fn_ = fn;
  root_ = root;
  comm_ = comm;
  ra_ = ra;
  t0_ = mono_ns();
  if (g_watch_on) {
    try {
      slot_ = this_thread_slot();
      if (slot_) watch_begin(slot_, fn, comm, count, root, ra, t0_);
    } catch (...) {  // no memory for the communicator's state: this call is not watched
      slot_ = nullptr;
    }
  }
}

void DiagScope::end() noexcept {
  const uint64_t dt = mono_ns() - t0_;
  if (slot_) watch_end(slot_);
  record_site(fn_, ra_, bytes_, dt);
  if (comm_ == MPI_COMM_WORLD) record_world(fn_, root_, bytes_);
}

// ---- finalize ---------------------------------------------------------------------------------
namespace {

// What one rank sends to rank 0 at finalize: a header and `n_send` site records (n_send is the
// same on every rank: it depends only on the world size).
struct SiteRec {
  uint64_t key;  // hash of (function, resolved site)
  int32_t fn;
  uint32_t nwin;  // durations in win (0: the site's calls could not be aligned)
  uint64_t calls, bytes, total_ns, min_ns, max_ns;
  float win[kWin];  // the last nwin calls, oldest first
};
struct Header {
  uint32_t version;
  uint32_t nsites;
  uint64_t world_n, world_hash;
  uint64_t ring[kRing];
};
static_assert(std::is_trivially_copyable_v<SiteRec> && std::is_trivially_copyable_v<Header>);

struct Site {
  int fn = 0;
  std::string name;  // "straggle.c:31 (main)"
  uint64_t key = 0;
  uint64_t calls = 0, bytes = 0, total = 0, min = UINT64_MAX, max = 0;
  std::vector<float> win;
  bool aligned = true;  // one entry only: its window is the site's last calls
};

std::mutex g_sites_mu;
bool g_finalized = false;
std::vector<Site> g_sites;  // this rank's, resolved
uint64_t g_dropped = 0;
std::string g_stragglers, g_check;  // rank 0's sections (JSON text), "" until computed

// This rank's call sites, resolved to file:line (addr2line) and merged by (function, site).
std::vector<Site> collect_sites(uint64_t& dropped) {
  struct Raw {
    const void* ra;
    int fn;
    uint64_t calls, bytes, total, min, max;
    std::vector<float> win;
  };
  std::vector<Raw> raw;
  dropped = 0;
  for (SiteTable* t = g_tables.load(std::memory_order_acquire); t; t = t->next) {
    dropped += t->dropped.load(std::memory_order_relaxed);
    for (SiteEntry& e : t->e) {
      const int fn = e.fn.load(std::memory_order_acquire);
      const uint64_t c = e.calls.load(std::memory_order_relaxed);
      if (fn < 0 || c == 0) continue;
      Raw r{e.ra.load(std::memory_order_relaxed), fn, c, e.bytes.load(std::memory_order_relaxed),
            e.total_ns.load(std::memory_order_relaxed), e.min_ns.load(std::memory_order_relaxed),
            e.max_ns.load(std::memory_order_relaxed), {}};
      const uint64_t n = std::min<uint64_t>(c, kWin);
      for (uint64_t k = c - n; k < c; ++k) r.win.push_back(e.win[k % kWin].load(std::memory_order_relaxed));
      raw.push_back(std::move(r));
    }
  }
  std::vector<const void*> ras;
  for (const Raw& r : raw) ras.push_back(r.ra);
  const std::vector<where::Frame> frames = where::resolve(ras);
  std::map<std::pair<int, std::string>, Site> merged;
  for (size_t i = 0; i < raw.size(); ++i) {
    const where::Frame& f = frames[i];
    std::string name = where::describe(f), key = name;
    if (f.file_line.empty()) {  // no line information: the offset in its object tells sites apart
      Dl_info di{};
      const auto a = reinterpret_cast<uintptr_t>(raw[i].ra);
      if (dladdr(reinterpret_cast<void*>(a - 1), &di) && di.dli_fbase) {
        char off[32];
        std::snprintf(off, sizeof off, "+0x%lx", static_cast<unsigned long>(a - reinterpret_cast<uintptr_t>(di.dli_fbase)));
        key += off;
        name += off;
      }
    }
    Site& s = merged[{raw[i].fn, key}];
    if (s.calls) {
      s.aligned = false;
    } else {
      s.fn = raw[i].fn;
      s.name = name;
      s.key = util::fnv1a(std::string(fn_name(raw[i].fn)) + "@" + key);
      s.win = raw[i].win;
    }
    s.calls += raw[i].calls;
    s.bytes += raw[i].bytes;
    s.total += raw[i].total;
    s.min = std::min(s.min, raw[i].min);
    s.max = std::max(s.max, raw[i].max);
  }
  std::vector<Site> out;
  for (auto& [k, s] : merged) out.push_back(std::move(s));
  std::sort(out.begin(), out.end(), [](const Site& a, const Site& b) { return a.total > b.total; });
  return out;
}

std::string call_sites_json(const std::vector<Site>& sites, uint64_t dropped) {
  nlohmann::json a = nlohmann::json::array();
  for (const Site& s : sites)
    a.push_back({{"function", fn_name(s.fn)}, {"site", s.name}, {"calls", s.calls}, {"bytes", s.bytes},
                 {"total_s", static_cast<double>(s.total) / 1e9}, {"min_s", static_cast<double>(s.min) / 1e9},
                 {"max_s", static_cast<double>(s.max) / 1e9}});
  nlohmann::json j = {{"clock", "CLOCK_MONOTONIC, time inside the call"}, {"sites", a}};
  if (dropped) j["dropped_calls"] = dropped;
  return j.dump();
}

// Site records per rank: as many as fit rank 0's budget, at most kMaxSendSites.
int sites_to_send(int size) {
  const size_t per_rank = kRootBudget / static_cast<size_t>(std::max(size, 1));
  if (per_rank <= sizeof(Header)) return 0;
  return static_cast<int>(std::min<size_t>(kMaxSendSites, (per_rank - sizeof(Header)) / sizeof(SiteRec)));
}

std::string sig_text(uint64_t sig) {
  const int fn = static_cast<int>(sig >> 48);
  const int root = static_cast<int>((sig >> 32) & 0xffff) - 1;
  std::string s = fn_name(fn);
  std::string args;
  if (bytes_agree(static_cast<Fn>(fn))) args = std::to_string(sig & 0xffffffffull) + " bytes";
  if (root >= 0) args += (args.empty() ? "" : ", ") + std::string("root ") + std::to_string(root);
  return args.empty() ? s : s + "(" + args + ")";
}

const Header& header_of(const std::vector<unsigned char>& all, size_t rec, int r) {
  return *reinterpret_cast<const Header*>(all.data() + rec * static_cast<size_t>(r));
}
const SiteRec* sites_of(const std::vector<unsigned char>& all, size_t rec, int r) {
  return reinterpret_cast<const SiteRec*>(all.data() + rec * static_cast<size_t>(r) + sizeof(Header));
}

// Rank 0: the collective sequences on MPI_COMM_WORLD compared (count and running hash, and the
// last kRing signatures to say where they part).
std::string check_json(const std::vector<unsigned char>& all, size_t rec, int size) {
  std::map<std::pair<uint64_t, uint64_t>, std::vector<int>> groups;
  uint64_t lo_n = UINT64_MAX, hi_n = 0;
  for (int r = 0; r < size; ++r) {
    const Header& h = header_of(all, rec, r);
    groups[{h.world_n, h.world_hash}].push_back(r);
    lo_n = std::min(lo_n, h.world_n);
    hi_n = std::max(hi_n, h.world_n);
  }
  nlohmann::json j = {{"communicator", "MPI_COMM_WORLD"}, {"compared", "sequence of (collective, bytes, root) per rank"}};
  if (groups.size() == 1) {
    j["match"] = true;
    j["collectives"] = lo_n;
    return j.dump();
  }
  j["match"] = false;
  nlohmann::json jg = nlohmann::json::array();
  std::string line = "MISMATCH at MPI_Finalize: the blocking collectives on MPI_COMM_WORLD differ between ranks:";
  std::vector<std::pair<std::vector<int>, uint64_t>> by_rank;  // listed from the lowest rank
  for (auto& [k, ranks] : groups) by_rank.push_back({ranks, k.first});
  std::sort(by_rank.begin(), by_rank.end());
  for (auto& [ranks, n] : by_rank) {
    jg.push_back({{"ranks", ranks}, {"collectives", n}});
    line += (ranks.size() == 1 ? " rank " : " ranks ") + ranks_text(ranks) + " made " + std::to_string(n) + ";";
  }
  j["groups"] = jg;
  // The first sequence number, among those every rank still holds in its ring, where they differ.
  const uint64_t from = hi_n >= static_cast<uint64_t>(kRing) ? hi_n - kRing + 1 : 1;
  for (uint64_t p = std::max<uint64_t>(from, 1); p <= lo_n; ++p) {
    std::map<uint64_t, std::vector<int>> at;
    for (int r = 0; r < size; ++r) at[header_of(all, rec, r).ring[p % kRing]].push_back(r);
    if (at.size() < 2) continue;
    nlohmann::json calls = nlohmann::json::array();
    line += " first difference at collective #" + std::to_string(p) + ":";
    for (auto& [sig, ranks] : at) {
      calls.push_back({{"call", sig_text(sig)}, {"ranks", ranks}});
      line += (ranks.size() == 1 ? " rank " : " ranks ") + ranks_text(ranks) + " called " + sig_text(sig) + ";";
    }
    j["first_difference"] = {{"sequence", p}, {"calls", calls}};
    break;
  }
  if (!j.contains("first_difference")) {
    if (lo_n == hi_n) line += " the difference lies before the last " + std::to_string(kRing) + " collectives";
    else line += " the ranks that made more went on after #" + std::to_string(lo_n);
  }
  if (line.back() == ';') line.pop_back();
  log::write(config::LogLevel::Warn, "report", __FILE__, __LINE__, "%s", line.c_str());
  j["message"] = line;
  return j.dump();
}

// Rank 0: the ranks' records of each call site handed to find_stragglers (straggler.cpp), in
// the order of the sites' keys, and its result as the report's `stragglers` section.
std::string stragglers_json(const std::vector<unsigned char>& all, size_t rec, int size,
                            const std::map<uint64_t, std::string>& names) {
  std::map<uint64_t, SiteSamples> by_key;
  for (int r = 0; r < size; ++r) {
    const Header& h = header_of(all, rec, r);
    const SiteRec* s = sites_of(all, rec, r);
    for (uint32_t i = 0; i < h.nsites; ++i) {
      SiteSamples& site = by_key[s[i].key];
      site.ranks.resize(static_cast<size_t>(size));
      site.ranks[static_cast<size_t>(r)] = {true, s[i].fn, s[i].calls, static_cast<double>(s[i].total_ns), s[i].win,
                                            std::min<uint32_t>(s[i].nwin, kWin)};
    }
  }
  std::vector<SiteSamples> sites;
  for (auto& [key, site] : by_key) {
    auto it = names.find(key);
    site.name = it != names.end() ? it->second : "?";
    sites.push_back(std::move(site));
  }
  const StragglerResult res = find_stragglers(sites);
  nlohmann::json found = nlohmann::json::array();
  for (const Straggler& f : res.ranks) {
    // A persistent late arrival: C4's non-communication slow, in the hang reports' vocabulary.
    found.push_back({{"class", c4_key(C4Class::NonCommunicationSlow)},
                     {"rank", f.rank},
                     {"function", fn_name(f.fn)},
                     {"site", f.site},
                     {"calls", f.calls},
                     {"last_in", f.last_in},
                     {"of_last", f.of_last},
                     {"mean_late_s", f.mean_late_s},
                     {"time_s", f.time_s},
                     {"median_time_s", f.median_time_s},
                     {"others_lost_s", f.others_lost_s}});
    HIER_INFO("report", "straggler: rank %d arrived last in %d of the last %d %s at %s; the others lost %.3f s waiting for it",
              f.rank, f.last_in, f.of_last, fn_name(f.fn), f.site.c_str(), f.others_lost_s);
  }
  return nlohmann::json({{"compared_sites", res.compared_sites}, {"unmatched_sites", res.unmatched_sites}, {"ranks", found}}).dump();
}

}  // namespace

void sites_init(bool report_here, bool watchdog_on) {
  int want = report_here || watchdog_on ? 1 : 0;
  if (PMPI_Allreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS || !want) return;
  base::add_report_section("call_sites", [] {
    std::lock_guard<std::mutex> lk(g_sites_mu);
    if (!g_finalized) g_sites = collect_sites(g_dropped);  // at exit, without MPI_Finalize
    return call_sites_json(g_sites, g_dropped);
  });
  base::add_report_section("stragglers", [] {
    std::lock_guard<std::mutex> lk(g_sites_mu);
    return g_stragglers.empty() ? std::string("null") : g_stragglers;
  });
  base::add_report_section("collective_check", [] {
    std::lock_guard<std::mutex> lk(g_sites_mu);
    return g_check.empty() ? std::string("null") : g_check;
  });
  g_diag_on = true;
}

void sites_finalize() {
  if (!g_diag_on) return;
  g_diag_on = false;
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  const int n_send = sites_to_send(size);
  const size_t rec = sizeof(Header) + static_cast<size_t>(n_send) * sizeof(SiteRec);
  // Static storage: no allocation can fail between here and the gather.
  alignas(8) static unsigned char mine[sizeof(Header) + kMaxSendSites * sizeof(SiteRec)];
  std::memset(mine, 0, sizeof mine);
  std::map<uint64_t, std::string> names;
  // Whatever fails here, this rank still takes part in the gather below (with what it has):
  // the other ranks are waiting in it.
  try {
    std::lock_guard<std::mutex> lk(g_sites_mu);
    g_sites = collect_sites(g_dropped);
    g_finalized = true;
    auto* h = reinterpret_cast<Header*>(mine);
    h->version = 1;
    h->world_n = g_world.n.load();
    h->world_hash = g_world.hash.load();
    for (int i = 0; i < kRing; ++i) h->ring[i] = g_world.ring[i].load();
    // The sites compared: the most used ones of the collectives every rank waits in, in an
    // order that is the same on every rank for sites used equally often.
    std::vector<const Site*> cand;
    for (const Site& s : g_sites)
      if (waits_for_all(base_of(static_cast<Fn>(s.fn)))) cand.push_back(&s);
    std::sort(cand.begin(), cand.end(), [](const Site* a, const Site* b) {
      return a->calls != b->calls ? a->calls > b->calls : a->key < b->key;
    });
    auto* out = reinterpret_cast<SiteRec*>(mine + sizeof(Header));
    for (const Site* s : cand) {
      if (h->nsites >= static_cast<uint32_t>(n_send)) break;
      SiteRec& r = out[h->nsites++];
      r.key = s->key;
      r.fn = s->fn;
      r.nwin = s->aligned ? static_cast<uint32_t>(s->win.size()) : 0;
      r.calls = s->calls;
      r.bytes = s->bytes;
      r.total_ns = s->total;
      r.min_ns = s->min;
      r.max_ns = s->max;
      std::copy(s->win.begin(), s->win.end(), r.win);
      names[s->key] = s->name;
    }
  } catch (...) {
    std::memset(mine, 0, sizeof mine);
  }
  MPI_Comm c = MPI_COMM_NULL;
  // A duplicate: nothing the program left unmatched on MPI_COMM_WORLD can meet these messages.
  if (PMPI_Comm_dup(MPI_COMM_WORLD, &c) != MPI_SUCCESS) return;
  // Rank 0 says whether it could make room (within kRootBudget) before anyone sends.
  std::vector<unsigned char> all;
  int room = 1;
  if (rank == 0) {
    try {
      all.resize(rec * static_cast<size_t>(size));
    } catch (...) {
      room = 0;
    }
  }
  int rc = PMPI_Bcast(&room, 1, MPI_INT, 0, c);
  if (rc == MPI_SUCCESS && room)
    rc = PMPI_Gather(mine, static_cast<int>(rec), MPI_BYTE, all.data(), static_cast<int>(rec), MPI_BYTE, 0, c);
  PMPI_Comm_free(&c);
  if (!room) rc = MPI_ERR_NO_MEM;
  if (rc != MPI_SUCCESS || rank != 0) {
    std::lock_guard<std::mutex> lk(g_sites_mu);
    if (rank != 0) g_stragglers = g_check = R"({"on_rank": 0})";
    return;
  }
  for (int r = 0; r < size; ++r)
    if (header_of(all, rec, r).version != 1) return;  // a rank could not prepare its record
  std::string st = stragglers_json(all, rec, size, names), ck = check_json(all, rec, size);
  std::lock_guard<std::mutex> lk(g_sites_mu);
  g_stragglers = std::move(st);
  g_check = std::move(ck);
}

}  // namespace hier::diag
