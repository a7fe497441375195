// Every builder, on every shape below, for every rank at once: the simulator runs the schedules
// together (no MPI) and the results are checked against the collective's definition.
#include <gtest/gtest.h>

#include <numeric>

#include "sched/build.hpp"
#include "simulator.hpp"
#include "topo/table.hpp"

namespace coll_test {
namespace {

using hier::sched::Algorithm;
using hier::sched::Schedule;
using hier::topo::LevelSpec;
using hier::topo::Shape;

struct NamedShape {
  std::string name;
  Shape shape;
};

std::vector<int> ids(std::initializer_list<int> l) { return std::vector<int>(l); }

std::vector<NamedShape> shapes() {
  auto mk = [](std::string name, int P, std::vector<LevelSpec> specs) {
    return NamedShape{std::move(name), hier::topo::analyze(hier::topo::make_table(P, specs))};
  };
  return {
      mk("node:2 x2", 4, {{"node", 2, {}}}),
      mk("node:2 x3", 6, {{"node", 2, {}}}),
      mk("node:3 x2", 6, {{"node", 3, {}}}),
      mk("node:4 x2", 8, {{"node", 4, {}}}),
      mk("gpu:2,node:4 x2", 8, {{"gpu", 2, {}}, {"node", 4, {}}}),
      mk("gpu:2,node:6 x2", 12, {{"gpu", 2, {}}, {"node", 6, {}}}),
      mk("round-robin nodes", 6, {{"node", 0, ids({0, 1, 0, 1, 0, 1})}}),
      mk("gpu:2 in round-robin nodes", 8, {{"gpu", 2, {}}, {"node", 0, ids({0, 1, 0, 1, 0, 1, 0, 1})}}),
      mk("uneven node:3 (7)", 7, {{"node", 3, {}}}),
      mk("uneven node:3 (8)", 8, {{"node", 3, {}}}),
      mk("uneven detected, leader not first", 5, {{"node", 0, ids({1, 0, 1, 0, 0})}}),
      mk("uneven gpu:2 in nodes 3+2", 5, {{"gpu", 2, {}}, {"node", 0, ids({0, 0, 0, 1, 1})}}),
  };
}

int64_t val(int r, int64_t i) { return r * 100000 + i + 1; }

void check(const NamedShape& ns, const std::vector<Schedule>& sc, std::vector<RankData>& d, const std::string& what) {
  const std::string err = simulate(ns.shape, sc, d);
  ASSERT_EQ(err, "") << ns.name << ": " << what << "\n" << hier::sched::to_string(sc[0]);
}

TEST(CollShapes, AreWhatTheTestsAssume) {
  for (const auto& ns : shapes()) {
    const bool uneven = ns.name.rfind("uneven", 0) == 0;
    EXPECT_TRUE(ns.shape.hierarchical()) << ns.name;
    EXPECT_EQ(ns.shape.cartesian, !uneven) << ns.name << ": " << ns.shape.describe();
  }
}

TEST(CollBuilders, Allreduce) {
  for (const auto& ns : shapes()) {
    const int P = ns.shape.size;
    for (Algorithm a : {Algorithm::RsArAg, Algorithm::TreeAllreduce})
      for (bool ordered : {false, true})
        for (int64_t n : {1, 5, 13, 64})
          for (bool in_place : {false, true}) {
            if (a == Algorithm::RsArAg && !ns.shape.cartesian) continue;
            std::vector<Schedule> sc;
            std::vector<RankData> d(P);
            for (int r = 0; r < P; ++r) {
              sc.push_back(hier::sched::build_allreduce(ns.shape, r, n, in_place, a, ordered));
              std::vector<int64_t> in(n);
              for (int64_t i = 0; i < n; ++i) in[i] = val(r, i);
              d[r].send = in_place ? std::vector<int64_t>() : in;
              d[r].recv = in_place ? in : std::vector<int64_t>(n, -1);
            }
            const std::string what = std::string("allreduce ") + to_string(a) + " n=" + std::to_string(n) +
                                     (in_place ? " in place" : "") + (ordered ? " ordered" : "");
            check(ns, sc, d, what);
            for (int r = 0; r < P; ++r)
              for (int64_t i = 0; i < n; ++i) {
                int64_t sum = 0;
                for (int q = 0; q < P; ++q) sum += val(q, i);
                ASSERT_EQ(d[r].recv[i], sum) << ns.name << ": " << what << " rank " << r << " element " << i;
              }
          }
  }
}

TEST(CollBuilders, Reduce) {
  for (const auto& ns : shapes()) {
    const int P = ns.shape.size;
    for (Algorithm a : {Algorithm::RsReduceGather, Algorithm::TwoStep, Algorithm::Tree})
      for (int64_t n : {1, 7, 33})
        for (int root = 0; root < P; ++root)
          for (bool in_place : {false, true}) {
            std::vector<Schedule> sc;
            std::vector<RankData> d(P);
            for (int r = 0; r < P; ++r) {
              sc.push_back(hier::sched::build_reduce(ns.shape, r, n, root, in_place, a));
              std::vector<int64_t> in(n);
              for (int64_t i = 0; i < n; ++i) in[i] = val(r, i);
              const bool ip = in_place && r == root;
              d[r].send = ip ? std::vector<int64_t>() : in;
              d[r].recv = ip ? in : std::vector<int64_t>(n, -1);
            }
            const std::string what = std::string("reduce ") + to_string(a) + " n=" + std::to_string(n) + " root " +
                                     std::to_string(root) + (in_place ? " in place" : "");
            check(ns, sc, d, what);
            for (int64_t i = 0; i < n; ++i) {
              int64_t sum = 0;
              for (int q = 0; q < P; ++q) sum += val(q, i);
              ASSERT_EQ(d[root].recv[i], sum) << ns.name << ": " << what << " element " << i;
            }
          }
  }
}

TEST(CollBuilders, ReduceScatter) {
  for (const auto& ns : shapes()) {
    if (!ns.shape.cartesian) continue;
    const int P = ns.shape.size;
    for (int variant = 0; variant < 3; ++variant)
      for (bool in_place : {false, true}) {
        std::vector<int64_t> counts(P);
        for (int r = 0; r < P; ++r) counts[r] = variant == 0 ? 3 : variant == 1 ? (r % 3 == 1 ? 0 : r + 1) : 1;
        std::vector<int64_t> displ(P + 1, 0);
        for (int r = 0; r < P; ++r) displ[r + 1] = displ[r] + counts[r];
        const int64_t total = displ[P];
        std::vector<Schedule> sc;
        std::vector<RankData> d(P);
        for (int r = 0; r < P; ++r) {
          sc.push_back(hier::sched::build_reduce_scatter(ns.shape, r, counts, in_place));
          std::vector<int64_t> in(total);
          for (int64_t i = 0; i < total; ++i) in[i] = val(r, i);
          d[r].send = in_place ? std::vector<int64_t>() : in;
          d[r].recv = in_place ? in : std::vector<int64_t>(counts[r], -1);
        }
        const std::string what = "reduce_scatter variant " + std::to_string(variant) + (in_place ? " in place" : "");
        check(ns, sc, d, what);
        for (int r = 0; r < P; ++r)
          for (int64_t i = 0; i < counts[r]; ++i) {
            int64_t sum = 0;
            for (int q = 0; q < P; ++q) sum += val(q, displ[r] + i);
            ASSERT_EQ(d[r].recv[i], sum) << ns.name << ": " << what << " rank " << r << " element " << i;
          }
      }
  }
}

TEST(CollBuilders, Allgather) {
  for (const auto& ns : shapes()) {
    if (!ns.shape.cartesian) continue;
    const int P = ns.shape.size;
    for (int variant = 0; variant < 2; ++variant) {
      std::vector<int64_t> counts(P);
      for (int r = 0; r < P; ++r) counts[r] = variant == 0 ? 4 : (r % 3 == 2 ? 0 : r + 2);
      std::vector<Schedule> sc;
      std::vector<RankData> d(P);
      for (int r = 0; r < P; ++r) {
        sc.push_back(hier::sched::build_allgather(ns.shape, r, counts));
        for (int64_t i = 0; i < counts[r]; ++i) d[r].send.push_back(val(r, i));
        d[r].recv_blocks.assign(P, {});
      }
      check(ns, sc, d, "allgather variant " + std::to_string(variant));
      for (int r = 0; r < P; ++r)
        for (int q = 0; q < P; ++q) ASSERT_EQ(d[r].recv_blocks[q], d[q].send) << ns.name << " rank " << r << " block " << q;
    }
  }
}

TEST(CollBuilders, Bcast) {
  for (const auto& ns : shapes()) {
    const int P = ns.shape.size;
    for (Algorithm a : {Algorithm::ScatterAllgather, Algorithm::TwoStep, Algorithm::Tree})
      for (int64_t n : {1, 5, 40})
        for (int root = 0; root < P; ++root) {
          std::vector<Schedule> sc;
          std::vector<RankData> d(P);
          for (int r = 0; r < P; ++r) {
            sc.push_back(hier::sched::build_bcast(ns.shape, r, n, root, a));
            d[r].recv.assign(n, -r - 1);
            if (r == root)
              for (int64_t i = 0; i < n; ++i) d[r].recv[i] = val(r, i);
          }
          const std::string what = std::string("bcast ") + to_string(a) + " n=" + std::to_string(n) + " root " + std::to_string(root);
          check(ns, sc, d, what);
          for (int r = 0; r < P; ++r) ASSERT_EQ(d[r].recv, d[root].recv) << ns.name << ": " << what << " rank " << r;
        }
  }
}

TEST(CollBuilders, Alltoall) {
  for (const auto& ns : shapes()) {
    if (!ns.shape.cartesian) continue;
    const int P = ns.shape.size;
    for (int64_t b : {1, 3}) {
      std::vector<Schedule> sc;
      std::vector<RankData> d(P);
      for (int r = 0; r < P; ++r) {
        sc.push_back(hier::sched::build_alltoall(ns.shape, r, b));
        for (int q = 0; q < P; ++q) {
          std::vector<int64_t> blk(b);
          for (int64_t i = 0; i < b; ++i) blk[i] = val(r, q * 10 + i);
          d[r].send_blocks.push_back(blk);
        }
        d[r].recv_blocks.assign(P, {});
      }
      check(ns, sc, d, "alltoall block " + std::to_string(b));
      for (int r = 0; r < P; ++r)
        for (int q = 0; q < P; ++q) ASSERT_EQ(d[r].recv_blocks[q], d[q].send_blocks[r]) << ns.name << " at " << r << " from " << q;
    }
  }
}

// The simulator itself: a send without its receive deadlocks, overlapping source and destination
// and out-of-range offsets are reported, and members that disagree are caught.
TEST(CollSimulator, CatchesBrokenSchedules) {
  const Shape s = hier::topo::analyze(hier::topo::make_table(4, {{"node", 2, {}}}));
  using hier::sched::Buf;
  using hier::sched::Kind;
  using hier::sched::On;
  auto run = [&](const std::vector<Schedule>& sc) {
    std::vector<RankData> d(4);
    for (auto& x : d) x.send = x.recv = std::vector<int64_t>(8, 1);
    return simulate(s, sc, d);
  };
  std::vector<Schedule> sc(4);
  hier::sched::Step send;
  send.kind = Kind::Send;
  send.comm = {On::Node, 0};
  send.src = {Buf::Send, 0};
  send.count = 1;
  send.root = 1;
  sc[0].steps.push_back(send);  // rank 1 never receives it
  EXPECT_NE(run(sc).find("deadlock"), std::string::npos);

  std::vector<Schedule> alias(4);
  for (auto& x : alias) {
    hier::sched::Step ar;
    ar.kind = Kind::Allreduce;
    ar.comm = {On::Node, 0};
    ar.src = {Buf::Recv, 0};
    ar.dst = {Buf::Recv, 2};
    ar.count = 4;
    x.steps.push_back(ar);
  }
  EXPECT_NE(run(alias).find("overlap"), std::string::npos);

  alias[2].steps[0].dst = {Buf::Recv, 100};
  alias[3].steps[0].dst = {Buf::Recv, 100};
  alias[0].steps[0].dst = alias[1].steps[0].dst = {Buf::Send, 0};
  EXPECT_NE(run(alias).find("outside"), std::string::npos);

  std::vector<Schedule> mismatch(4);
  for (int r = 0; r < 4; ++r) {
    hier::sched::Step b;
    b.kind = Kind::Bcast;
    b.comm = {On::Node, 0};
    b.dst = {Buf::Recv, 0};
    b.count = 2;
    b.root = r % 2 == 0 ? 0 : 1;  // the two members name different roots
    mismatch[r].steps.push_back(b);
  }
  EXPECT_NE(run(mismatch).find("mismatch"), std::string::npos);
}

TEST(CollBuilders, Barrier) {
  for (const auto& ns : shapes()) {
    std::vector<Schedule> sc;
    std::vector<RankData> d(ns.shape.size);
    for (int r = 0; r < ns.shape.size; ++r) sc.push_back(hier::sched::build_barrier(ns.shape, r));
    check(ns, sc, d, "barrier");
  }
}

}  // namespace
}  // namespace coll_test
