// Straggler detection (src/diag/straggler.cpp) on synthetic timing records: who is named, who is
// not, and what the others lost. The rules are those of docs/diagnostics.md "Stragglers".
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "diag/straggler.hpp"

namespace {

using hier::Fn;
using hier::diag::find_stragglers;
using hier::diag::SiteSamples;
using hier::diag::StragglerResult;

// A site's durations (ns) per rank and call; the records point into it, so it outlives them.
struct Site {
  std::vector<std::vector<float>> win;  // [rank][call]
  SiteSamples samples;
};

// Every rank made `calls` calls of `fn` at the site; durations[r][c] is rank r's time inside
// call c. The window holds all calls (the tests use at most 32, the library's window).
Site make_site(Fn fn, const std::vector<std::vector<float>>& durations, const std::string& name = "t.c:1") {
  Site s;
  s.win = durations;
  s.samples.name = name;
  for (const auto& d : s.win) {
    double tot = 0;
    for (float x : d) tot += x;
    s.samples.ranks.push_back({true, static_cast<int>(fn), d.size(), tot, d.data(), static_cast<uint32_t>(d.size())});
  }
  return s;
}

// `size` ranks, `calls` calls: everyone spends `wait_ns` inside, except the late rank of each
// call, which spends `late_ns` (it arrived last: the others waited for it).
std::vector<std::vector<float>> pattern(int size, int calls, const std::vector<int>& late_rank, float wait_ns,
                                        float late_ns) {
  std::vector<std::vector<float>> d(static_cast<size_t>(size), std::vector<float>(static_cast<size_t>(calls), wait_ns));
  for (int c = 0; c < calls; ++c)
    if (late_rank[static_cast<size_t>(c)] >= 0) d[static_cast<size_t>(late_rank[static_cast<size_t>(c)])][static_cast<size_t>(c)] = late_ns;
  return d;
}

StragglerResult run(std::vector<Site*> sites) {
  std::vector<SiteSamples> in;
  for (Site* s : sites) in.push_back(s->samples);
  return find_stragglers(in);
}

TEST(Straggler, PersistentLastArriverIsNamedWithWhatTheOthersLost) {
  // 4 ranks, 12 calls: rank 3 arrives 40 ms late every time; the others wait 40 ms, it 10 us.
  Site s = make_site(Fn::Allreduce, pattern(4, 12, std::vector<int>(12, 3), 40e6f, 10e3f), "straggle.c:27 (main)");
  const StragglerResult r = run({&s});
  EXPECT_EQ(r.compared_sites, 1);
  EXPECT_EQ(r.unmatched_sites, 0);
  ASSERT_EQ(r.ranks.size(), 1u);
  const auto& f = r.ranks[0];
  EXPECT_EQ(f.rank, 3);
  EXPECT_EQ(f.fn, static_cast<int>(Fn::Allreduce));
  EXPECT_EQ(f.site, "straggle.c:27 (main)");
  EXPECT_EQ(f.calls, 12u);
  EXPECT_EQ(f.last_in, 12);
  EXPECT_EQ(f.of_last, 12);
  EXPECT_NEAR(f.mean_late_s, 40e-3 - 10e-6, 1e-9);
  EXPECT_NEAR(f.time_s, 12 * 10e-6, 1e-9);
  EXPECT_NEAR(f.median_time_s, 12 * 40e-3, 1e-6);
  // Three ranks each lost 12 x (40 ms - 10 us).
  EXPECT_NEAR(f.others_lost_s, 3 * 12 * (40e-3 - 10e-6), 1e-6);
}

TEST(Straggler, LastInTwoThirdsIsNamedLessIsNot) {
  // 12 calls: rank 2 last in 8 (exactly 2/3; the others in turn late in the rest) is named.
  std::vector<int> late(12, 2);
  for (int c : {0, 3, 6, 9}) late[static_cast<size_t>(c)] = c % 2;  // ranks 0 and 1 twice each
  Site named = make_site(Fn::Allreduce, pattern(3, 12, late, 5e6f, 1e3f));
  StragglerResult r = run({&named});
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_EQ(r.ranks[0].rank, 2);
  EXPECT_EQ(r.ranks[0].last_in, 8);
  // Last in 7 of 12 (< 2/3), though still the most often last and far below the median: nobody.
  late[1] = 0;
  Site sometimes = make_site(Fn::Allreduce, pattern(3, 12, late, 5e6f, 1e3f));
  r = run({&sometimes});
  EXPECT_EQ(r.compared_sites, 1);
  EXPECT_TRUE(r.ranks.empty());
}

TEST(Straggler, NoiseUnderOversubscriptionNamesNobody) {
  // 8 ranks, 32 calls, each rank's time inside a random 0..2 ms (the scheduler's doing, no
  // persistent pattern), over many seeds.
  for (unsigned seed = 1; seed <= 200; ++seed) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(0, 2e6f);
    std::vector<std::vector<float>> d(8, std::vector<float>(32));
    for (auto& r : d)
      for (float& x : r) x = u(g);
    Site s = make_site(Fn::Barrier, d);
    const StragglerResult r = run({&s});
    EXPECT_EQ(r.compared_sites, 1);
    EXPECT_TRUE(r.ranks.empty()) << "seed " << seed << " named rank " << r.ranks[0].rank;
  }
}

TEST(Straggler, SkewBelowTheGapIsNoise) {
  // Rank 1 is last every time, but only 15 us before the others leave: below the 20 us gap.
  Site s = make_site(Fn::Allreduce, pattern(2, 12, std::vector<int>(12, 1), 20e3f, 5e3f));
  EXPECT_TRUE(run({&s}).ranks.empty());
  // 25 us: named.
  Site t = make_site(Fn::Allreduce, pattern(2, 12, std::vector<int>(12, 1), 30e3f, 5e3f));
  ASSERT_EQ(run({&t}).ranks.size(), 1u);
}

TEST(Straggler, TotalMustBeAQuarterBelowTheMedian) {
  // Rank 0 arrives last in every call of the window by a clear gap, but its total time inside
  // is only 20 % below the median total (one long call before the window evens it out): nobody.
  // Totals: median 12 x 1 ms = 12 ms; rank 0's 12 x 0.1 ms + what is added.
  auto d = pattern(3, 12, std::vector<int>(12, 0), 1e6f, 1e5f);
  Site s = make_site(Fn::Allreduce, d);
  for (auto& rs : s.samples.ranks) rs.calls = 13;  // one more call, before the window
  s.samples.ranks[0].total_ns += 12e6 * 0.8 - 12 * 1e5;  // rank 0's total: 9.6 ms
  EXPECT_TRUE(run({&s}).ranks.empty());
  // 30 % below: 8.4 ms. Named.
  s.samples.ranks[0].total_ns = 12e6 * 0.7;
  const StragglerResult r = run({&s});
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_EQ(r.ranks[0].rank, 0);
  EXPECT_EQ(r.ranks[0].of_last, 12);
  EXPECT_NEAR(r.ranks[0].others_lost_s, 2 * (12e-3 - 8.4e-3), 1e-9);
}

TEST(Straggler, NonSynchronizingCollectivesAreIgnored) {
  // The same persistent pattern at a bcast, a reduce, a scan and a gather: a root (or rank 0 of a
  // scan) may leave before the others arrive, so time inside is no measure of arrival. Compared
  // at none of them.
  const auto d = pattern(4, 12, std::vector<int>(12, 3), 40e6f, 10e3f);
  Site b = make_site(Fn::Bcast, d), r = make_site(Fn::Reduce, d), sc = make_site(Fn::Scan, d),
       g = make_site(Fn::Gather, d), ib = make_site(Fn::Ibcast, d);
  const StragglerResult res = run({&b, &r, &sc, &g, &ib});
  EXPECT_EQ(res.compared_sites, 0);
  EXPECT_TRUE(res.ranks.empty());
  // The large-count variant of an allreduce is one (base_of), and compared.
  Site c = make_site(Fn::Allreduce_c, d);
  EXPECT_EQ(run({&c}).ranks.size(), 1u);
}

TEST(Straggler, SitesNotRecordedAlikeAreUnmatched) {
  const auto d = pattern(3, 12, std::vector<int>(12, 2), 40e6f, 10e3f);
  Site missing = make_site(Fn::Allreduce, d), fewer = make_site(Fn::Allreduce, d), other = make_site(Fn::Allreduce, d);
  missing.samples.ranks[1].present = false;
  fewer.samples.ranks[2].calls = 11;
  other.samples.ranks[0].fn = static_cast<int>(Fn::Barrier);
  const StragglerResult r = run({&missing, &fewer, &other});
  EXPECT_EQ(r.unmatched_sites, 3);
  EXPECT_EQ(r.compared_sites, 0);
  EXPECT_TRUE(r.ranks.empty());
}

TEST(Straggler, WindowIsTheLastCallsEveryRankHolds) {
  // A rank whose calls could not be aligned (nwin 0) leaves nothing to compare; fewer than 3
  // calls in the window names nobody.
  const auto d = pattern(2, 12, std::vector<int>(12, 1), 40e6f, 10e3f);
  Site s = make_site(Fn::Allreduce, d);
  s.samples.ranks[0].nwin = 0;
  StragglerResult r = run({&s});
  EXPECT_EQ(r.compared_sites, 1);
  EXPECT_TRUE(r.ranks.empty());
  Site two = make_site(Fn::Allreduce, pattern(2, 2, {1, 1}, 40e6f, 10e3f));
  EXPECT_TRUE(run({&two}).ranks.empty());
  // Rank 0 holds 12 calls, rank 1 the last 4 only: the last 4 are compared.
  Site part = make_site(Fn::Allreduce, d);
  part.samples.ranks[1].win += 8;
  part.samples.ranks[1].nwin = 4;
  r = run({&part});
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_EQ(r.ranks[0].of_last, 4);
}

TEST(Straggler, SortedByTimeLost) {
  Site small = make_site(Fn::Allreduce, pattern(2, 12, std::vector<int>(12, 0), 1e6f, 1e3f), "a.c:1");
  Site big = make_site(Fn::Barrier, pattern(2, 12, std::vector<int>(12, 1), 9e6f, 1e3f), "b.c:2");
  const StragglerResult r = run({&small, &big});
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[0].site, "b.c:2");
  EXPECT_EQ(r.ranks[0].rank, 1);
  EXPECT_EQ(r.ranks[1].site, "a.c:1");
  EXPECT_EQ(r.ranks[1].rank, 0);
}

}  // namespace
