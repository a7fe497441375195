// The transport attribute (sched::Step::via, sched/transport.hpp) changes no result: every
// builder's schedules, routed through shared memory on every level communicator or on the node
// communicator only, differ from the unrouted ones in `via` alone (set exactly on the level
// steps of the kinds the transport runs), and the simulator, run on both, leaves every rank the
// same data, exact and quantized (float64 bits). The simulator does not model the transport's
// own fold order: the MPI suites' shm variants check that against PMPI (tests/coll/CMakeLists.txt).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>

#include "sched/build.hpp"
#include "sched/transport.hpp"
#include "simulator.hpp"
#include "topo/table.hpp"

namespace coll_test {
namespace {

using hier::sched::Algorithm;
using hier::sched::CommRef;
using hier::sched::On;
using hier::sched::Schedule;
using hier::sched::Via;
using hier::topo::Shape;

Shape shape(int P, int L) { return hier::topo::analyze(hier::topo::make_table(P, {{"node", L, {}}})); }
Shape three_levels() { return hier::topo::analyze(hier::topo::make_table(8, {{"gpu", 2, {}}, {"node", 4, {}}})); }

// Which communicators get a segment: every level one, or the node (and the innermost step) only.
const std::function<bool(const CommRef&)> kEvery = [](const CommRef&) { return true; };
const std::function<bool(const CommRef&)> kNodeOnly = [](const CommRef& c) {
  return c.on == On::Node || (c.on == On::Step && c.level == 0);
};

// Routes a copy of each schedule; checks that only `via` changed, where it should.
std::vector<Schedule> routed(const std::vector<Schedule>& sc, const std::function<bool(const CommRef&)>& has) {
  std::vector<Schedule> out = sc;
  int marked = 0;
  for (Schedule& s : out) marked += hier::sched::mark_shm(s, has);
  EXPECT_GT(marked, 0) << hier::sched::to_string(sc[0]);
  for (size_t r = 0; r < sc.size(); ++r) {
    EXPECT_EQ(out[r].steps.size(), sc[r].steps.size());
    for (size_t k = 0; k < sc[r].steps.size(); ++k) {
      const auto& a = sc[r].steps[k];
      const auto& b = out[r].steps[k];
      EXPECT_EQ(a.via, Via::Mpi);
      const bool want = a.comm.on != On::None && hier::sched::shm_runs(a.kind) && has(a.comm);
      EXPECT_EQ(b.via, want ? Via::Shm : Via::Mpi) << hier::sched::to_string(out[r]);
      EXPECT_TRUE(a.kind == b.kind && a.comm == b.comm && a.src == b.src && a.dst == b.dst && a.count == b.count &&
                  a.root == b.root && a.counts == b.counts && a.displs == b.displs && a.wave == b.wave);
    }
  }
  if (marked) {
    EXPECT_NE(hier::sched::to_string(out[0]).find(" via shm"), std::string::npos);
  }
  return out;
}

// Runs `sc` and its routed copies on the same inputs: the same data on every rank.
void same_result(const Shape& s, const std::vector<Schedule>& sc, const std::vector<RankData>& in, const std::string& what) {
  std::vector<RankData> plain = in;
  ASSERT_EQ(simulate(s, sc, plain), "") << what;
  for (const auto* has : {&kEvery, &kNodeOnly}) {
    std::vector<RankData> d = in;
    ASSERT_EQ(simulate(s, routed(sc, *has), d), "") << what;
    for (size_t r = 0; r < d.size(); ++r) {
      EXPECT_EQ(d[r].recv, plain[r].recv) << what << " rank " << r;
      EXPECT_EQ(d[r].recv_blocks, plain[r].recv_blocks) << what << " rank " << r;
    }
  }
}

int64_t val(int r, int64_t i) { return r * 100000 + i + 1; }

TEST(CollTransport, ExactSchedulesSameResult) {
  for (const Shape& s : {shape(4, 2), shape(8, 4), shape(8, 2), shape(9, 3), three_levels(), shape(7, 3)}) {
    const int P = s.size;
    for (int64_t n : {1, 13, 64}) {
      for (Algorithm a : {Algorithm::RsArAg, Algorithm::TreeAllreduce}) {
        if (a == Algorithm::RsArAg && !s.cartesian) continue;
        std::vector<Schedule> sc;
        std::vector<RankData> d(P);
        for (int r = 0; r < P; ++r) {
          sc.push_back(hier::sched::build_allreduce(s, r, n, false, a, false));
          for (int64_t i = 0; i < n; ++i) d[r].send.push_back(val(r, i));
          d[r].recv.assign(n, -1);
        }
        same_result(s, sc, d, "allreduce " + s.describe() + " n=" + std::to_string(n));
      }
      for (int root : {0, P - 1}) {
        std::vector<Schedule> sc, bc;
        std::vector<RankData> d(P), b(P);
        for (int r = 0; r < P; ++r) {
          sc.push_back(hier::sched::build_reduce(s, r, n, root, false, Algorithm::Tree));
          bc.push_back(hier::sched::build_bcast(s, r, n, root, Algorithm::Tree));
          for (int64_t i = 0; i < n; ++i) d[r].send.push_back(val(r, i));
          d[r].recv.assign(n, -1);
          b[r].recv.assign(n, r == root ? 7 : -1);
        }
        same_result(s, sc, d, "reduce " + s.describe());
        same_result(s, bc, b, "bcast " + s.describe());
      }
      if (!s.cartesian) continue;
      std::vector<int64_t> counts(P);
      for (int r = 0; r < P; ++r) counts[r] = (r % 3 == 1 ? 0 : r + n);  // uneven, some empty
      int64_t total = 0;
      for (int64_t c : counts) total += c;
      std::vector<Schedule> rs, ag;
      std::vector<RankData> d(P), g(P);
      for (int r = 0; r < P; ++r) {
        rs.push_back(hier::sched::build_reduce_scatter(s, r, counts, false));
        ag.push_back(hier::sched::build_allgather(s, r, counts));
        for (int64_t i = 0; i < total; ++i) d[r].send.push_back(val(r, i));
        d[r].recv.assign(counts[r], -1);
        for (int64_t i = 0; i < counts[r]; ++i) g[r].send.push_back(val(r, i));
        g[r].recv_blocks.assign(P, {});
      }
      same_result(s, rs, d, "reduce_scatter " + s.describe());
      same_result(s, ag, g, "allgather " + s.describe());
    }
  }
}

TEST(CollTransport, QuantizedSchedulesSameBits) {
  hier::sched::QuantParams q;
  q.block = 64;
  for (const Shape& s : {shape(4, 2), shape(8, 4), shape(8, 2)})
    for (int bits : {8, 4})
      for (int64_t n : {int64_t{37}, int64_t{1031}}) {
        q.bits = bits;
        const int P = s.size;
        std::vector<Schedule> sc;
        std::vector<RankData> d(P);
        for (int r = 0; r < P; ++r) {
          sc.push_back(hier::sched::build_quant_allreduce(s, r, n, false, q));
          for (int64_t i = 0; i < n; ++i) d[r].send.push_back(std::bit_cast<int64_t>(std::sin(0.3 * r + 0.01 * i)));
          d[r].recv.assign(n, 0);
        }
        same_result(s, sc, d, "quantized allreduce int" + std::to_string(bits) + " " + s.describe());
      }
}

}  // namespace
}  // namespace coll_test
