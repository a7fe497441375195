// Every builder, on every shape below, for every rank at once: the simulator runs the schedules
// together (no MPI) and the results are checked against the collective's definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "sched/build.hpp"
#include "sched/pipeline.hpp"
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

// Every rank's allreduce schedule (pipelined when chunks > 1), run together; all ranks must end
// with the element-wise sum. Returns rank 0's schedule for further checks.
Schedule allreduce_case(const NamedShape& ns, Algorithm a, bool ordered, int64_t n, bool in_place, int chunks) {
  const int P = ns.shape.size;
  std::vector<Schedule> sc;
  std::vector<RankData> d(P);
  for (int r = 0; r < P; ++r) {
    sc.push_back(hier::sched::pipeline(n, chunks, [&](int64_t m) {
      return hier::sched::build_allreduce(ns.shape, r, m, in_place, a, ordered);
    }));
    std::vector<int64_t> in(n);
    for (int64_t i = 0; i < n; ++i) in[i] = val(r, i);
    d[r].send = in_place ? std::vector<int64_t>() : in;
    d[r].recv = in_place ? in : std::vector<int64_t>(n, -1);
  }
  const std::string what = std::string("allreduce ") + to_string(a) + " n=" + std::to_string(n) + " chunks=" +
                           std::to_string(chunks) + (in_place ? " in place" : "") + (ordered ? " ordered" : "");
  const std::string err = simulate(ns.shape, sc, d);
  EXPECT_EQ(err, "") << ns.name << ": " << what << "\n" << hier::sched::to_string(sc[0]);
  for (int r = 0; r < P && err.empty(); ++r)
    for (int64_t i = 0; i < n; ++i) {
      int64_t sum = 0;
      for (int q = 0; q < P; ++q) sum += val(q, i);
      if (d[r].recv[i] != sum) {
        ADD_FAILURE() << ns.name << ": " << what << " rank " << r << " element " << i << ": " << d[r].recv[i]
                      << " != " << sum;
        return sc[0];
      }
    }
  return sc[0];
}

TEST(CollBuilders, Allreduce) {
  for (const auto& ns : shapes())
    for (Algorithm a : {Algorithm::RsArAg, Algorithm::TreeAllreduce})
      for (bool ordered : {false, true})
        for (int64_t n : {1, 5, 13, 64})
          for (bool in_place : {false, true})
            if (a != Algorithm::RsArAg || ns.shape.cartesian) allreduce_case(ns, a, ordered, n, in_place, 1);
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

// Chunk pipelining (sched/pipeline.hpp): the chunked schedules of every rank, run together, give
// the collective's result; each wave's steps are independent (the simulator checks), and the
// schedule really overlaps stages (some wave holds steps of several chunks).
bool overlaps(const Schedule& s) {
  for (size_t i = 1; i < s.steps.size(); ++i)
    if (s.steps[i].wave >= 0 && s.steps[i].wave == s.steps[i - 1].wave) return true;
  return false;
}

TEST(CollPipeline, ChunkCount) {
  using hier::sched::chunk_count;
  EXPECT_EQ(chunk_count(1000, 4000, 0), 1);           // off
  EXPECT_EQ(chunk_count(1000, 4000, 4000), 1);        // one chunk's worth
  EXPECT_EQ(chunk_count(1000, 4001, 4000), 2);
  EXPECT_EQ(chunk_count(1 << 20, 16 << 20, 4 << 20), 4);
  EXPECT_EQ(chunk_count(1 << 20, 16 << 20, 1), hier::sched::kMaxChunks);
  EXPECT_EQ(chunk_count(3, 3 << 20, 1024), 3);         // never more chunks than units
  EXPECT_EQ(chunk_count(1, 1 << 30, 1024), 1);
}

TEST(CollPipeline, Allreduce) {
  for (const auto& ns : shapes())
    for (Algorithm a : {Algorithm::RsArAg, Algorithm::TreeAllreduce})
      for (bool ordered : {false, true})
        for (int64_t n : {2, 13, 200})
          for (int chunks : {2, 3, 7})
            for (bool in_place : {false, true}) {
              if (a == Algorithm::RsArAg && !ns.shape.cartesian) continue;
              const int c = static_cast<int>(std::min<int64_t>(chunks, n));
              const Schedule s = allreduce_case(ns, a, ordered, n, in_place, c);
              ASSERT_EQ(s.chunks, c) << ns.name;
              ASSERT_TRUE(overlaps(s)) << ns.name << "\n" << hier::sched::to_string(s);
            }
}

TEST(CollPipeline, Bcast) {
  for (const auto& ns : shapes()) {
    const int P = ns.shape.size;
    for (Algorithm a : {Algorithm::ScatterAllgather, Algorithm::TwoStep, Algorithm::Tree})
      for (int64_t n : {3, 40})
        for (int chunks : {2, 3})
          for (int root = 0; root < P; ++root) {
            std::vector<Schedule> sc;
            std::vector<RankData> d(P);
            for (int r = 0; r < P; ++r) {
              sc.push_back(hier::sched::pipeline(
                  n, chunks, [&](int64_t m) { return hier::sched::build_bcast(ns.shape, r, m, root, a); }));
              d[r].recv.assign(n, -r - 1);
              if (r == root)
                for (int64_t i = 0; i < n; ++i) d[r].recv[i] = val(r, i);
            }
            const std::string what = std::string("pipelined bcast ") + to_string(a) + " n=" + std::to_string(n) +
                                     " chunks=" + std::to_string(chunks) + " root " + std::to_string(root);
            ASSERT_TRUE(std::any_of(sc.begin(), sc.end(), overlaps)) << what << "\n" << hier::sched::to_string(sc[root]);
            check(ns, sc, d, what);
            for (int r = 0; r < P; ++r) ASSERT_EQ(d[r].recv, d[root].recv) << ns.name << ": " << what << " rank " << r;
          }
  }
}

// A pipelined schedule keeps every field of the chunks' schedules that is about the whole call
// (sched/pipeline.cpp copies the first chunk's schedule whole), and sums or interleaves only the
// regions and the steps. Each field below is set to a value no builder gives it.
TEST(CollPipeline, KeepsEveryScheduleField) {
  // A new field of Schedule changes its size: set it below too, and check that the pipelined
  // schedule keeps it (or say here why it differs).
  static_assert(sizeof(Schedule) == 128, "sched::Schedule has a new field: add it to this test");
  const auto all = shapes();
  const NamedShape& ns = all[0];  // node:2 x2
  auto build = [&](int64_t m) {
    Schedule one = hier::sched::build_allreduce(ns.shape, 0, m, false, Algorithm::RsArAg, false);
    one.name = "field-test";
    one.unit = hier::sched::Unit::Bytes;
    one.reads_recv = one.writes_recv = true;
    one.direct_rs_from = 12345;
    one.padded_agv_from = 6789;
    one.quant_bits = 4;
    one.quant_block = 96;
    one.scratch = 10;
    one.records = 100;  // each chunk's own region, 64-aligned after the first
    one.residual = 7;
    return one;
  };
  const Schedule one = build(50), s = hier::sched::pipeline(100, 2, build);
  ASSERT_EQ(s.chunks, 2);
  EXPECT_EQ(s.name, one.name);
  EXPECT_EQ(s.unit, one.unit);
  EXPECT_EQ(s.reads_recv, one.reads_recv);
  EXPECT_EQ(s.writes_recv, one.writes_recv);
  EXPECT_EQ(s.direct_rs_from, one.direct_rs_from);
  EXPECT_EQ(s.padded_agv_from, one.padded_agv_from);
  EXPECT_EQ(s.quant_bits, one.quant_bits);
  EXPECT_EQ(s.quant_block, one.quant_block);
  EXPECT_EQ(s.scratch, 2 * one.scratch);
  EXPECT_EQ(s.residual, 2 * one.residual);
  EXPECT_EQ(s.records, 128 + one.records);
  EXPECT_EQ(s.steps.size(), 2 * one.steps.size());
}

// Without Step::stage, tree non-leaders would issue the node's bcast of chunk c before the
// leader's reduce of chunk c + 1: the simulator must see that order mismatch.
TEST(CollPipeline, SimulatorCatchesStageSkew) {
  const auto all = shapes();
  const NamedShape& ns = all[3];  // node:4 x2
  const int P = ns.shape.size, n = 8;
  std::vector<Schedule> sc;
  std::vector<RankData> d(P);
  for (int r = 0; r < P; ++r) {
    sc.push_back(hier::sched::pipeline(n, 3, [&](int64_t m) {
      Schedule one = hier::sched::build_allreduce(ns.shape, r, m, false, Algorithm::TreeAllreduce, false);
      for (auto& st : one.steps) st.stage = -1;  // number stages by list position instead
      return one;
    }));
    d[r].send.assign(n, 1);
    d[r].recv.assign(n, 0);
  }
  EXPECT_NE(simulate(ns.shape, sc, d), "");

  // A wave whose steps touch the same data is a race.
  std::vector<Schedule> race(P);
  std::vector<RankData> d2(P);
  for (int r = 0; r < P; ++r) {
    race[r] = hier::sched::build_allreduce(ns.shape, r, n, false, Algorithm::RsArAg, false);
    for (auto& st : race[r].steps) st.wave = 0;
    d2[r].send.assign(n, 1);
    d2[r].recv.assign(n, 0);
  }
  EXPECT_NE(simulate(ns.shape, race, d2).find("race"), std::string::npos);
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

// Gather and scatter through the leaders, on every shape (uneven, interleaved nodes, leaders
// that are not the lowest rank of the world) and every root: each block arrives where its rank
// puts it (the root's user blocks by rank, whatever the nodes' order).
TEST(CollBuilders, Gather) {
  for (const auto& ns : shapes()) {
    const int P = ns.shape.size;
    for (int64_t b : {1, 3})
      for (int root = 0; root < P; ++root) {
        std::vector<Schedule> sc;
        std::vector<RankData> d(P);
        for (int r = 0; r < P; ++r) {
          sc.push_back(hier::sched::build_gather(ns.shape, r, b, root));
          for (int64_t i = 0; i < b; ++i) d[r].send.push_back(val(r, i));
          d[r].recv_blocks.assign(P, {});
        }
        check(ns, sc, d, "gather block " + std::to_string(b) + " root " + std::to_string(root));
        for (int q = 0; q < P; ++q) ASSERT_EQ(d[root].recv_blocks[q], d[q].send) << ns.name << " root " << root << " block " << q;
        for (int r = 0; r < P; ++r)
          for (int q = 0; q < P && r != root; ++q) ASSERT_TRUE(d[r].recv_blocks[q].empty()) << ns.name << " rank " << r;
      }
  }
}

TEST(CollBuilders, Scatter) {
  for (const auto& ns : shapes()) {
    const int P = ns.shape.size;
    for (int64_t b : {1, 3})
      for (int root = 0; root < P; ++root)
        for (bool in_place : {false, true}) {
          std::vector<Schedule> sc;
          std::vector<RankData> d(P);
          for (int r = 0; r < P; ++r) {
            sc.push_back(hier::sched::build_scatter(ns.shape, r, b, root, in_place && r == root));
            d[r].recv.assign(b, -r - 1);
          }
          for (int q = 0; q < P; ++q) {
            std::vector<int64_t> blk(b);
            for (int64_t i = 0; i < b; ++i) blk[i] = val(q, i * 7);
            d[root].send_blocks.push_back(blk);
          }
          const std::string what = "scatter block " + std::to_string(b) + " root " + std::to_string(root) +
                                   (in_place ? " in place" : "");
          check(ns, sc, d, what);
          for (int r = 0; r < P; ++r) {
            if (r == root && in_place) {  // the root's receive buffer is not its to touch
              ASSERT_EQ(d[r].recv, std::vector<int64_t>(b, -r - 1)) << ns.name << ": " << what;
              continue;
            }
            ASSERT_EQ(d[r].recv, d[root].send_blocks[r]) << ns.name << ": " << what << " rank " << r;
          }
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
