// Straggler detection on the ranks' call-site timing records (see straggler.hpp for the rules).
#include "diag/straggler.hpp"

#include <algorithm>

namespace hier::diag {

// interposer/api.txt's flag all.
bool waits_for_all(Fn b) { return kFnWaitsForAll[static_cast<int>(b)]; }

namespace {

constexpr double kMinGapNs = 20e3;  // per call: below this, skew is noise

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool valid_fn(int fn) { return fn >= 0 && fn < static_cast<int>(Fn::Count); }

}  // namespace

StragglerResult find_stragglers(const std::vector<SiteSamples>& sites) {
  StragglerResult res;
  for (const SiteSamples& site : sites) {
    const std::vector<SiteSample>& v = site.ranks;
    const int size = static_cast<int>(v.size());
    if (size == 0) continue;
    const SiteSample& r0 = v[0];
    const bool same = std::all_of(v.begin(), v.end(), [&](const SiteSample& s) {
      return s.present && r0.present && s.calls == r0.calls && s.fn == r0.fn;
    });
    if (!same) {
      ++res.unmatched_sites;
      continue;
    }
    if (!valid_fn(r0.fn) || !waits_for_all(base_of(static_cast<Fn>(r0.fn))) || size < 2) continue;
    ++res.compared_sites;
    std::vector<double> tot;
    uint32_t w = UINT32_MAX;
    for (const SiteSample& s : v) {
      tot.push_back(s.total_ns);
      w = std::min(w, s.nwin);
    }
    // Call c of the last w calls, on rank r.
    auto at = [&](int r, uint32_t c) {
      const SiteSample& s = v[static_cast<size_t>(r)];
      return static_cast<double>(s.win[s.nwin - w + c]);
    };
    // Per call in the window: who arrived last (least time inside), and by how much.
    std::vector<int> last_in(static_cast<size_t>(size), 0);
    std::vector<double> late_ns(static_cast<size_t>(size), 0);
    for (uint32_t c = 0; c < w; ++c) {
      int arg = 0;
      for (int r = 1; r < size; ++r)
        if (at(r, c) < at(arg, c)) arg = r;
      std::vector<double> others;
      for (int r = 0; r < size; ++r)
        if (r != arg) others.push_back(at(r, c));
      const double m = median(others), mine = at(arg, c);
      if (m - mine >= std::max(kMinGapNs, 0.5 * m)) {
        ++last_in[static_cast<size_t>(arg)];
        late_ns[static_cast<size_t>(arg)] += m - mine;
      }
    }
    const int s = static_cast<int>(std::max_element(last_in.begin(), last_in.end()) - last_in.begin());
    const double med = median(tot), mine = tot[static_cast<size_t>(s)];
    // Persistent: last in at least 2/3 of the calls compared (3 at least), and well below the
    // median time over all calls at the site.
    if (w < 3 || 3 * last_in[static_cast<size_t>(s)] < 2 * static_cast<int>(w) || med - mine < 0.25 * med) continue;
    double lost = 0;
    for (double t : tot) lost += std::max(0.0, t - mine);
    Straggler f;
    f.rank = s;
    f.fn = r0.fn;
    f.site = site.name;
    f.calls = r0.calls;
    f.last_in = last_in[static_cast<size_t>(s)];
    f.of_last = static_cast<int>(w);
    f.mean_late_s = late_ns[static_cast<size_t>(s)] / f.last_in / 1e9;
    f.time_s = mine / 1e9;
    f.median_time_s = med / 1e9;
    f.others_lost_s = lost / 1e9;
    res.ranks.push_back(std::move(f));
  }
  std::stable_sort(res.ranks.begin(), res.ranks.end(),
                   [](const Straggler& a, const Straggler& b) { return a.others_lost_s > b.others_lost_s; });
  return res;
}

}  // namespace hier::diag
