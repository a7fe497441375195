// The finalize exchange of the call-site diagnostics: this rank's call sites (site_timing.cpp)
// resolved to file:line and merged, one fixed-size record per rank gathered on rank 0 with the
// rank's collective sequence (collective_sequence.cpp), and the report's `call_sites`,
// `stragglers` (straggler.cpp's rules) and `collective_check` sections (docs/diagnostics.md).
#include "diag/sites.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "base/hooks.hpp"
#include "diag/log.hpp"
#include "diag/c4_class.hpp"
#include "diag/collective_sequence.hpp"
#include "diag/site_timing.hpp"
#include "diag/straggler.hpp"
#include "diag/where.hpp"
#include "hier/fn.hpp"
#include "util/fnv.hpp"

namespace hier::diag {

namespace {

constexpr int kMaxSendSites = 32;   // call sites per rank compared at finalize
constexpr size_t kRootBudget = 64u << 20;  // bytes rank 0 may receive at finalize

// What one rank sends to rank 0 at finalize: a header and `n_send` site records (n_send is the
// same on every rank: it depends only on the world size).
struct SiteRec {
  uint64_t key;  // hash of (function, resolved site)
  int32_t fn;
  uint32_t nwin;  // durations in win (0: the site's calls could not be aligned)
  uint64_t calls, bytes, total_ns, min_ns, max_ns;
  float win[kSiteWin];  // the last nwin calls, oldest first
};
struct Header {
  uint32_t version;
  uint32_t nsites;
  SeqRecord seq;  // the rank's collectives on MPI_COMM_WORLD
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
  const std::vector<TimedSite> raw = timed_sites(dropped);
  std::vector<const void*> ras;
  for (const TimedSite& r : raw) ras.push_back(r.ra);
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

const Header& header_of(const std::vector<unsigned char>& all, size_t rec, int r) {
  return *reinterpret_cast<const Header*>(all.data() + rec * static_cast<size_t>(r));
}
const SiteRec* sites_of(const std::vector<unsigned char>& all, size_t rec, int r) {
  return reinterpret_cast<const SiteRec*>(all.data() + rec * static_cast<size_t>(r) + sizeof(Header));
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
                                            std::min<uint32_t>(s[i].nwin, kSiteWin)};
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
    h->seq = sequence_now();
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
  std::vector<SeqRecord> seqs;
  for (int r = 0; r < size; ++r) seqs.push_back(header_of(all, rec, r).seq);
  std::string st = stragglers_json(all, rec, size, names), ck = sequence_check_json(seqs);
  std::lock_guard<std::mutex> lk(g_sites_mu);
  g_stragglers = std::move(st);
  g_check = std::move(ck);
}

}  // namespace hier::diag
