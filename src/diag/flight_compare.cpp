#include "diag/flight_compare.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "diag/hang_report.hpp"
#include "util/strings.hpp"

namespace hier::diag {

namespace {

constexpr char kSiteSep = '\x1f';  // between call sites (clean_text makes control characters spaces)
constexpr char kCallSep = ';';
constexpr size_t kMaxCalls = 100000;

std::string record_of(const RecentCall& c, size_t site) {
  char b[256];
  std::snprintf(b, sizeof b, "%s,%llx,%llu,%lld,%d,%llu,%c,%zu", c.call.c_str(), static_cast<unsigned long long>(c.comm),
                static_cast<unsigned long long>(c.seq), c.count, c.root, static_cast<unsigned long long>(c.bytes),
                c.state, site);
  return b;
}

bool same_call(const RecentCall& a, const RecentCall& b) {
  return recent_signature(a) == recent_signature(b) && (a.site.empty() || b.site.empty() || a.site == b.site);
}

std::string at_site(const RecentCall& c) { return recent_signature(c) + (c.site.empty() ? "" : " at " + c.site); }

}  // namespace

const char* recent_state_name(char state) {
  switch (state) {
    case 'E': return "entered";
    case 'P': return "pending";
    default: return "completed";
  }
}

std::string recent_signature(const RecentCall& c) {
  std::string s = c.call + "(";
  if (c.count >= 0) s += "count " + std::to_string(c.count);
  if (c.root >= 0) s += std::string(c.count >= 0 ? ", " : "") + "root " + std::to_string(c.root);
  return s + ")";
}

std::string encode_recent(const std::vector<RecentCall>& calls, uint64_t key, size_t max_bytes) {
  // Which calls fit: those on `key` first, then the others, newest first within each.
  std::vector<bool> keep(calls.size(), false);
  std::map<std::string, size_t> site_index;
  size_t used = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = calls.size(); i-- > 0;) {
      if ((calls[i].comm == key) != (pass == 0)) continue;
      const std::string site = clean_text(calls[i].site, 200);
      const size_t cost = record_of(calls[i], 0).size() + 8 + (site_index.count(site) ? 0 : site.size() + 1);
      if (used + cost > max_bytes) continue;
      used += cost;
      keep[i] = true;
      site_index.emplace(site, 0);
    }
  std::string sites, out;
  size_t n = 0;
  for (auto& [s, idx] : site_index) {
    idx = n++;
    sites += (idx ? std::string(1, kSiteSep) : "") + s;
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!keep[i]) continue;
    if (!out.empty()) out += kCallSep;
    out += record_of(calls[i], site_index[clean_text(calls[i].site, 200)]);
  }
  return sites + '\t' + out;
}

bool decode_recent(const std::string& sites_field, const std::string& calls_field, std::vector<RecentCall>& out) {
  out.clear();
  const std::vector<std::string> sites = util::split(sites_field, kSiteSep);
  if (calls_field.empty()) return true;
  for (const std::string& rec : util::split(calls_field, kCallSep)) {
    const std::vector<std::string> f = util::split(rec, ',');
    if (f.size() != 8 || f[0].rfind("MPI_", 0) != 0 || f[6].size() != 1 || out.size() >= kMaxCalls) {
      out.clear();
      return false;
    }
    RecentCall c;
    c.call = clean_text(f[0], 64);
    c.comm = std::strtoull(f[1].c_str(), nullptr, 16);
    c.seq = std::strtoull(f[2].c_str(), nullptr, 10);
    c.count = std::atoll(f[3].c_str());
    c.root = std::atoi(f[4].c_str());
    c.bytes = std::strtoull(f[5].c_str(), nullptr, 10);
    c.state = f[6][0] == 'E' || f[6][0] == 'P' ? f[6][0] : 'C';
    const size_t si = std::strtoull(f[7].c_str(), nullptr, 10);
    if (si < sites.size()) c.site = clean_text(sites[si]);
    out.push_back(std::move(c));
  }
  return true;
}

Divergence find_divergence(const std::vector<MemberStatus>& members, uint64_t key, uint64_t hung_seq) {
  Divergence d;
  // Each answering member's calls on the communicator, by sequence number.
  std::map<int, std::map<uint64_t, const RecentCall*>> by;
  uint64_t lo = 0;
  for (const MemberStatus& m : members) {
    if (m.reach != MemberStatus::Ok) continue;
    std::map<uint64_t, const RecentCall*> s;
    for (const RecentCall& c : m.recent)
      if (c.comm == key && c.seq > 0 && c.seq <= hung_seq) s[c.seq] = &c;
    if (s.empty()) continue;
    lo = std::max(lo, s.begin()->first);
    by[m.world] = std::move(s);
  }
  if (by.size() < 2 || lo == 0) return d;
  auto call_at = [&](int r, uint64_t s) -> const RecentCall* {
    auto it = by[r].find(s);
    return it == by[r].end() ? nullptr : it->second;
  };
  for (uint64_t s = lo; s <= hung_seq && d.kind == Divergence::None; ++s) {
    std::map<std::string, std::vector<int>> sigs, sites;
    bool all_sites = true;
    for (auto& [r, calls] : by)
      if (const RecentCall* c = call_at(r, s)) {
        sigs[recent_signature(*c)].push_back(r);
        sites[c->site].push_back(r);
        all_sites = all_sites && !c->site.empty();
      }
    if (sigs.size() > 1) d.kind = Divergence::DifferentCalls;
    else if (all_sites && sites.size() > 1) d.kind = Divergence::DifferentSites;
    if (d.kind == Divergence::None) continue;
    d.seq = s;
    for (auto& [site, ranks] : sites) {
      const RecentCall* c = call_at(ranks[0], s);
      if (d.kind == Divergence::DifferentSites) {
        d.groups.push_back({recent_signature(*c), site, ranks});
      } else {
        for (const int r : ranks) {  // grouped by signature and site together
          const RecentCall* cr = call_at(r, s);
          auto g = std::find_if(d.groups.begin(), d.groups.end(), [&](const Divergence::Group& x) {
            return x.call == recent_signature(*cr) && x.site == cr->site;
          });
          if (g == d.groups.end()) d.groups.push_back({recent_signature(*cr), cr->site, {r}});
          else g->ranks.push_back(r);
        }
      }
    }
  }
  if (d.kind != Divergence::None) {
    // The largest group (the lowest rank on a tie) is the reference; each other member either
    // skipped the reference's call (its next calls are the reference's one later), made an extra
    // call (the reverse), or called something else.
    std::sort(d.groups.begin(), d.groups.end(), [](const Divergence::Group& a, const Divergence::Group& b) {
      return a.ranks.size() != b.ranks.size() ? a.ranks.size() > b.ranks.size() : a.ranks[0] < b.ranks[0];
    });
    int ref = d.groups[0].ranks[0];
    for (const int r : d.groups[0].ranks)
      if (by[r].rbegin()->first > by[ref].rbegin()->first) ref = r;
    const RecentCall* want = call_at(ref, d.seq);
    auto shifted = [&](int r, int by_r, int by_ref) {  // r's calls from seq+by_r match ref's from seq+by_ref
      int compared = 0;
      for (uint64_t k = 0;; ++k) {
        const RecentCall* a = call_at(r, d.seq + by_r + k);
        const RecentCall* b = call_at(ref, d.seq + by_ref + k);
        if (!a || !b) return compared > 0;
        if (!same_call(*a, *b)) return false;
        ++compared;
      }
    };
    for (size_t g = 1; g < d.groups.size(); ++g)
      for (const int r : d.groups[g].ranks) {
        const RecentCall* got = call_at(r, d.seq);
        std::string what;
        if (shifted(r, 0, 1)) what = "skipped " + at_site(*want);
        else if (shifted(r, 1, 0)) what = "made an extra call: " + at_site(*got);
        else what = "called " + at_site(*got) + " instead of " + at_site(*want);
        d.notes.push_back({r, what + " (#" + std::to_string(d.seq) + ")"});
      }
    return d;
  }
  // The same calls as far as every member went: the first call a member never entered.
  uint64_t first = 0;
  for (const MemberStatus& m : members)
    if (m.reach == MemberStatus::Ok && m.seq_on_comm < hung_seq && (!first || m.seq_on_comm + 1 < first))
      first = m.seq_on_comm + 1;
  if (!first) return d;
  for (auto& [r, calls] : by)
    if (const RecentCall* c = call_at(r, first)) {
      if (d.groups.empty()) d.groups.push_back({recent_signature(*c), c->site, {}});
      d.groups[0].ranks.push_back(r);
    }
  if (d.groups.empty()) return d;
  d.kind = Divergence::NeverEntered;
  d.seq = first;
  const std::string call = d.groups[0].call + (d.groups[0].site.empty() ? "" : " at " + d.groups[0].site);
  for (const MemberStatus& m : members)
    if (m.reach == MemberStatus::Ok && m.seq_on_comm + 1 == first)
      d.notes.push_back({m.world, "never entered " + call + " (#" + std::to_string(first) + ")"});
  return d;
}

}  // namespace hier::diag
