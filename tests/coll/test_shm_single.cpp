// Single-copy shared-memory steps (exec/shm_steps.cpp, shm/cma.hpp), called as functions on a
// segment of MPI_COMM_WORLD (one node) and compared with the MPI's own collective on the same
// data: reduce-scatter and allgatherv with uneven and empty pieces, in place or not, plain and
// derived (gapped) types; bcast and reduce from the first and the last rank, in place or not,
// plain, derived dense (two ints, a user's op) and gapped types (reduce: copy-in, gaps kept);
// the single-copy reduce-scatter and reduce give the copy-in form's bits on arbitrary floats
// (the same order of folds); and a member that cannot read its peers (injected) means copy-in on
// every member, with the same results and no hang. A step that went single copy
// takes one round of the segment, the copy-in form of these sizes more: that is how each test
// knows which form ran. Run with HIER_SHM_CMA=on (single copy wherever allowed: no tune file).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "exec/shm_steps.hpp"
#include "exec/typed.hpp"
#include "shm/segment.hpp"

namespace {
bool g_refuse_cma = false;  // rank 1 fails the single-copy probe while set
}

extern "C" __attribute__((visibility("default"))) int hier_test_inject(const char* point) {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return g_refuse_cma && r == 1 && std::strcmp(point, "cma") == 0;
}

namespace hier::exec {
namespace {

// This rank and the ranks of MPI_COMM_WORLD.
struct World {
  int me = 0, p = 0;
  World() {
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
  }
};

std::unique_ptr<shm::Segment> open_world(bool refuse_cma) {
  g_refuse_cma = refuse_cma;
  bool failed = false;
  auto seg = shm::open_segment(MPI_COMM_WORLD, shm::kHalfBytes, &failed);
  g_refuse_cma = false;
  int bad = failed ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad) return nullptr;
  seg->unlink_name();
  return seg;
}

// Runs a step to its end; returns the rounds of the segment it took.
uint64_t run(shm::Segment& seg, sched::Kind kind, const ShmArgs& a) {
  const uint64_t before = seg.take_rounds(0);
  auto st = shm_start(kind, seg, a);
  EXPECT_TRUE(st != nullptr);
  if (!st) return 0;
  EXPECT_EQ(shm::finish(*st), MPI_SUCCESS);
  return seg.take_rounds(0) - before;
}

// Pieces of 400 KB and more (two rounds of the copy-in form, well above the single-copy
// threshold), every third empty, the others a prime apart.
std::vector<int64_t> piece_counts(int p, int64_t base) {
  std::vector<int64_t> c(p);
  for (int i = 0; i < p; ++i) c[i] = i % 3 == 1 ? 0 : base + 7 * i;
  return c;
}

// Reduce-scatter of ints (exact) against PMPI_Reduce_scatter, through `seg`; `single`: whether
// it must have run single copy (then also in place: the input in dst, the piece at its start).
void reduce_scatter_matches_pmpi(shm::Segment& seg, bool single) {
  const auto [me, p] = World();
  const TypeInfo ti = type_info(MPI_INT);
  const std::vector<int64_t> counts = piece_counts(p, 100003);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  std::vector<int> in(total), icounts(counts.begin(), counts.end());
  for (int64_t j = 0; j < total; ++j) in[j] = static_cast<int>((j * 31 + me * 1000003) % 2000001) - 1000000;
  std::vector<int> want(counts[me] + 1, -7);
  ASSERT_EQ(PMPI_Reduce_scatter(in.data(), want.data(), icounts.data(), MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  for (bool in_place : {false, true}) {
    if (in_place && !single) continue;  // the copy-in form declines it (no schedule asks it)
    std::vector<int> got(in_place ? total + 1 : counts[me] + 1, -7);
    if (in_place) std::copy(in.begin(), in.end(), got.begin());
    ShmArgs a{in_place ? nullptr : reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(got.data()),
              in_place, 0, 0, counts, {}, &ti, MPI_SUM, true};
    const uint64_t rounds = run(seg, sched::Kind::ReduceScatter, a);
    EXPECT_EQ(rounds == 1, single) << "rounds " << rounds;
    for (int64_t j = 0; j < counts[me]; ++j) ASSERT_EQ(got[j], want[j]) << "in_place " << in_place << " at " << j;
    if (!in_place) {
      EXPECT_EQ(got[counts[me]], -7) << "written past the piece";
    }
  }
}

// Allgatherv of a gapped type (an int every 8 bytes) and of plain ints, pieces with gaps
// between them, in place or not: the whole receive buffer, gaps included, as PMPI's.
void allgatherv_matches_pmpi(shm::Segment& seg, bool single) {
  const auto [me, p] = World();
  MPI_Datatype gapped = MPI_DATATYPE_NULL;
  MPI_Type_create_resized(MPI_INT, 0, 8, &gapped);
  MPI_Type_commit(&gapped);
  for (MPI_Datatype t : {MPI_INT, gapped}) {
    const TypeInfo ti = type_info(t);
    const int stride = t == MPI_INT ? 1 : 2;  // ints per element
    const std::vector<int64_t> counts = piece_counts(p, 300007);
    std::vector<int64_t> displs(p);
    std::vector<int> icounts(p), idispls(p);
    int64_t at = 0;
    for (int i = 0; i < p; ++i) displs[i] = at, icounts[i] = static_cast<int>(counts[i]), idispls[i] = static_cast<int>(at),
                                at += counts[i] + 3;
    std::vector<int> mine(counts[me] * stride + 1, -1);
    for (int64_t j = 0; j < counts[me]; ++j) mine[j * stride] = me * 1000000 + static_cast<int>(j);
    std::vector<int> want(at * stride, -5);
    ASSERT_EQ(PMPI_Allgatherv(mine.data(), icounts[me], t, want.data(), icounts.data(), idispls.data(), t, MPI_COMM_WORLD),
              MPI_SUCCESS);
    for (bool in_place : {false, true}) {
      std::vector<int> got(at * stride, -5);
      if (in_place)
        for (int64_t j = 0; j < counts[me]; ++j) got[(displs[me] + j) * stride] = mine[j * stride];
      ShmArgs a{in_place ? nullptr : reinterpret_cast<const char*>(mine.data()), reinterpret_cast<char*>(got.data()),
                in_place, 0, 0, counts, displs, &ti, MPI_OP_NULL, true};
      const uint64_t rounds = run(seg, sched::Kind::Allgatherv, a);
      EXPECT_EQ(rounds == 1, single) << "rounds " << rounds;
      ASSERT_EQ(got, want) << "type " << (t == MPI_INT ? "int" : "gapped") << " in_place " << in_place;
    }
  }
  MPI_Type_free(&gapped);
}

// A commutative user op on elements of ints (MPI_SUM is not defined on derived types): adds
// the ints of each element, wherever the type puts them (size / 4 ints every extent / 4).
void add_ints(void* in, void* inout, int* len, MPI_Datatype* t) {
  int size = 0;
  MPI_Aint lb = 0, extent = 0;
  MPI_Type_size(*t, &size);
  MPI_Type_get_extent(*t, &lb, &extent);
  const auto* a = static_cast<const int*>(in);
  auto* b = static_cast<int*>(inout);
  for (int64_t e = 0; e < *len; ++e)
    for (int i = 0; i < size / 4; ++i) b[e * (extent / 4) + i] += a[e * (extent / 4) + i];
}

// Bcast and reduce of ints, of a dense derived type (two ints) and of a gapped one (an int
// every 8 bytes), from the first and the last rank, in place at the root or not: the whole
// buffer, gaps included, as PMPI's. `single`: whether the steps must have run single copy (the
// gapped reduce never does: its sums would overwrite the root's gaps).
void rooted_match_pmpi(shm::Segment& seg, bool single) {
  const auto [me, p] = World();
  MPI_Datatype pair = MPI_DATATYPE_NULL, gapped = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_create_resized(MPI_INT, 0, 8, &gapped);
  MPI_Type_commit(&pair);
  MPI_Type_commit(&gapped);
  MPI_Op add = MPI_OP_NULL;
  MPI_Op_create(add_ints, 1, &add);
  const int64_t n = 400009;  // 1.6 MB of ints: two rounds of the copy-in form
  for (MPI_Datatype t : {MPI_INT, pair, gapped}) {
    const TypeInfo ti = type_info(t);
    const int ints = t == MPI_INT ? 1 : 2;  // ints per element
    const char* name = t == MPI_INT ? "int" : t == pair ? "pair" : "gapped";
    const MPI_Op op = t == MPI_INT ? MPI_SUM : add;
    for (int root : {0, p - 1}) {
      std::vector<int> mine(n * ints);
      for (size_t j = 0; j < mine.size(); ++j) mine[j] = static_cast<int>((j * 31 + me * 1000003 + root) % 2000001) - 1000000;
      // bcast: the root's values, the others' buffers pre-filled (gaps must stay as they were)
      std::vector<int> want(n * ints, -5), got(n * ints, -5);
      if (me == root) want = mine, got = mine;
      ASSERT_EQ(PMPI_Bcast(want.data(), static_cast<int>(n), t, root, MPI_COMM_WORLD), MPI_SUCCESS);
      ShmArgs b{nullptr, reinterpret_cast<char*>(got.data()), false, n, root, {}, {}, &ti, MPI_OP_NULL, true};
      EXPECT_EQ(run(seg, sched::Kind::Bcast, b) == 1, single) << "bcast " << name;
      ASSERT_EQ(got, want) << "bcast " << name << " root " << root;
      // reduce
      std::vector<int> rwant(n * ints, -5);
      ASSERT_EQ(PMPI_Reduce(mine.data(), rwant.data(), static_cast<int>(n), t, op, root, MPI_COMM_WORLD), MPI_SUCCESS);
      for (bool in_place : {false, true}) {
        const bool here = in_place && me == root;
        std::vector<int> rgot(n * ints, -5);
        const int data = t == pair ? 2 : 1;  // ints of an element's data (the gapped one: the first)
        if (here)
          for (size_t j = 0; j < mine.size(); j += ints) std::copy_n(mine.begin() + j, data, rgot.begin() + j);
        ShmArgs r{here ? nullptr : reinterpret_cast<const char*>(mine.data()), reinterpret_cast<char*>(rgot.data()), here,
                  n, root, {}, {}, &ti, op, true};
        EXPECT_EQ(run(seg, sched::Kind::Reduce, r) == 1, single && t != gapped) << "reduce " << name;
        if (me == root) {
          ASSERT_EQ(rgot, rwant) << "reduce " << name << " root " << root << " in_place " << in_place;
        } else {
          EXPECT_EQ(rgot, std::vector<int>(n * ints, -5)) << "a non-root's buffer written";
        }
      }
    }
  }
  MPI_Op_free(&add);
  MPI_Type_free(&pair);
  MPI_Type_free(&gapped);
}

TEST(ShmSingle, BcastAndReduceMatchPmpi) {
  auto seg = open_world(false);
  ASSERT_TRUE(seg);
  if (!seg->cma()) GTEST_SKIP() << "this machine refuses process_vm_readv between the ranks";
  rooted_match_pmpi(*seg, true);
}

// Arbitrary floats: the single-copy reduce folds each element in the copy-in form's order (the
// root's, then root-1, root-2, ...), whichever member folds it, so both give the same bits.
TEST(ShmSingle, ReduceSameBitsAsCopyIn) {
  auto seg = open_world(false);
  ASSERT_TRUE(seg);
  if (!seg->cma()) GTEST_SKIP() << "this machine refuses process_vm_readv between the ranks";
  const auto [me, p] = World();
  const TypeInfo ti = type_info(MPI_FLOAT);
  const int64_t n = 300007;
  std::mt19937 gen(99 + me);
  std::uniform_real_distribution<float> d(-1e3f, 1e3f);
  std::vector<float> in(n), single(n, 0.f), copyin(n, 1.f);
  for (float& x : in) x = d(gen);
  const int root = p - 1;
  for (bool sc : {true, false}) {
    ShmArgs a{reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(sc ? single.data() : copyin.data()), false,
              n, root, {}, {}, &ti, MPI_SUM};
    a.single_copy = sc;
    EXPECT_EQ(run(*seg, sched::Kind::Reduce, a) == 1, sc);
  }
  if (me == root) {
    ASSERT_EQ(std::memcmp(single.data(), copyin.data(), single.size() * sizeof(float)), 0);
  }
}

TEST(ShmSingle, ReduceScatterMatchesPmpi) {
  auto seg = open_world(false);
  ASSERT_TRUE(seg);
  if (!seg->cma()) GTEST_SKIP() << "this machine refuses process_vm_readv between the ranks";
  reduce_scatter_matches_pmpi(*seg, true);
}

TEST(ShmSingle, AllgathervMatchesPmpi) {
  auto seg = open_world(false);
  ASSERT_TRUE(seg);
  if (!seg->cma()) GTEST_SKIP() << "this machine refuses process_vm_readv between the ranks";
  allgatherv_matches_pmpi(*seg, true);
}

// Arbitrary floats: the single-copy reduce-scatter folds in the copy-in form's order, so both
// give the same bits.
TEST(ShmSingle, ReduceScatterSameBitsAsCopyIn) {
  auto seg = open_world(false);
  ASSERT_TRUE(seg);
  if (!seg->cma()) GTEST_SKIP() << "this machine refuses process_vm_readv between the ranks";
  const auto [me, p] = World();
  const TypeInfo ti = type_info(MPI_FLOAT);
  const std::vector<int64_t> counts = piece_counts(p, 100003);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  std::mt19937 gen(1234 + me);
  std::uniform_real_distribution<float> d(-1e3f, 1e3f);
  std::vector<float> in(total), single(counts[me]), copyin(counts[me]);
  for (float& x : in) x = d(gen);
  for (bool sc : {true, false}) {
    ShmArgs a{reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(sc ? single.data() : copyin.data()), false,
              0, 0, counts, {}, &ti, MPI_SUM};
    a.single_copy = sc;
    EXPECT_EQ(run(*seg, sched::Kind::ReduceScatter, a) == 1, sc);
  }
  ASSERT_EQ(std::memcmp(single.data(), copyin.data(), single.size() * sizeof(float)), 0);
}

// Rank 1 cannot read its peers: every member finds single copy off, and the steps, copy-in,
// still match the MPI's (no member waits for a single-copy round the others never run).
TEST(ShmSingle, OneRankRefusedMeansCopyInEverywhere) {
  if (World().p < 2) GTEST_SKIP();
  auto seg = open_world(true);
  ASSERT_TRUE(seg);
  EXPECT_FALSE(seg->cma());
  reduce_scatter_matches_pmpi(*seg, false);
  allgatherv_matches_pmpi(*seg, false);
  rooted_match_pmpi(*seg, false);
}

}  // namespace
}  // namespace hier::exec
