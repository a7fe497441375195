// The engine without MPI: synthetic strided-block trees (every kernel width, negative strides,
// gathers, nested groups) packed by the host backend and by the reference walker; simplifier
// rules; 64-bit size arithmetic (messages beyond 2^31 bytes are checked here, not allocated).
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <random>
#include <vector>

#include "device/backend.hpp"
#include "dtype/canon.hpp"
#include "dtype/engine.hpp"
#include "dtype/planner.hpp"
#include "dtype/tune.hpp"
#include "reference.hpp"

namespace hier::test {
namespace {

using dtype::Node;
using dtype::Seq;

struct Built {
  dtype::Program prog;
  device::BlockProgram view;
};

Built build(Seq s, int64_t extent) {
  dtype::simplify(s);
  Built b;
  b.prog = dtype::lower(s);
  b.view = {b.prog.items.data(), b.prog.seqs.data(), b.prog.entries.data(), b.prog.seqs[0].bytes, extent,
            b.prog.offsets.data()};
  return b;
}

// Packs with the backend and the reference over a buffer wide enough for every offset used.
void check_same(const Built& b, int64_t count, int64_t lo, int64_t hi, std::mt19937_64& rng) {
  std::vector<char> src(static_cast<size_t>(hi - lo));
  for (char& c : src) c = static_cast<char>(rng());
  char* base = src.data() - lo;
  const int64_t bytes = b.view.size * count;
  std::vector<char> a(static_cast<size_t>(bytes)), r(a.size());
  device::host().pack(b.view, base, count, a.data());
  int64_t at = 0;
  walk(b.view, count, [&](int64_t o, int64_t len) {
    std::memcpy(r.data() + at, base + o, static_cast<size_t>(len));
    at += len;
  });
  ASSERT_EQ(at, bytes);
  ASSERT_EQ(a, r);
  // Unpack into a zeroed copy, compare with the reference scatter.
  std::vector<char> u(src.size(), 0), v(src.size(), 0);
  device::host().unpack(b.view, a.data(), count, u.data() - lo);
  at = 0;
  walk(b.view, count, [&](int64_t o, int64_t len) {
    std::memcpy(v.data() - lo + o, a.data() + at, static_cast<size_t>(len));
    at += len;
  });
  ASSERT_EQ(u, v);
}

TEST(DtypeEngine, EveryKernelWidthAndRank) {
  std::mt19937_64 rng(5);
  for (int64_t w : {1, 2, 3, 4, 5, 7, 8, 12, 16, 20, 24, 32, 48, 64, 100, 256, 300}) {
    for (int nd = 1; nd <= 4; ++nd) {
      Node n = Node::leaf(0, w);
      int64_t span = w;
      for (int d = 0; d < nd; ++d) {
        const int64_t cnt = 2 + d, str = (d % 2 ? -1 : 1) * (span + 8);
        n.dim[n.nd++] = {cnt, str};
        span += (cnt - 1) * (span + 8);
      }
      // offsets reach [-span, span]
      Built b = build(Seq{n}, 2 * span + 64);
      SCOPED_TRACE(dtype::to_string(Seq{n}));
      check_same(b, 3, -span - 8, 6 * span + 256, rng);
    }
  }
}

TEST(DtypeEngine, GathersAndGroups) {
  std::mt19937_64 rng(9);
  for (int k = 0; k < 500; ++k) {
    Node g;
    g.kind = Node::Gather;
    const bool uniform = k % 2;
    const int64_t w = std::vector<int64_t>{1, 2, 4, 8, 16, 32, 6}[k % 7];
    for (int i = 0; i < 3 + k % 9; ++i)
      g.runs.push_back({static_cast<int64_t>(rng() % 512) - 256, uniform ? w : 1 + static_cast<int64_t>(rng() % 40)});
    Node grp;
    grp.kind = Node::Group;
    grp.kids = {g, Node::leaf(600, 12)};
    grp.nd = 2;
    grp.dim[0] = {3, 2048};
    grp.dim[1] = {2, -700};
    Seq s{grp, Node::leaf(-300, 5)};
    Built b = build(s, 8000);
    SCOPED_TRACE(dtype::to_string(s));
    check_same(b, 2, -1200, 8000 * 2 + 8000, rng);
    // Without the dense offsets array a program must still pack right (variable-width path).
    b.view.offsets = nullptr;
    check_same(b, 2, -1200, 8000 * 2 + 8000, rng);
  }
}

// Long gathers (the 4-at-a-time loop and its tail) of each fixed width and of mixed widths,
// overlapping runs included (unpack: the later run wins, as in typemap order).
TEST(DtypeEngine, LongGathers) {
  std::mt19937_64 rng(13);
  for (int64_t w : {0, 1, 2, 4, 8, 12, 16, 24, 32, 64}) {
    for (int n : {5, 6, 7, 8, 33}) {
      Node g;
      g.kind = Node::Gather;
      for (int i = 0; i < n; ++i)
        g.runs.push_back({static_cast<int64_t>(rng() % 4096), w ? w : 1 + static_cast<int64_t>(rng() % 300)});
      Built b = build(Seq{g}, 5000);
      SCOPED_TRACE(dtype::to_string(Seq{g}));
      check_same(b, 1, 0, 5000, rng);
      check_same(b, 3, 0, 15000, rng);
    }
  }
}

// Rows of 1-8 B go four at a time (loads first, then stores: kernels.hpp rows_fixed), the rest
// one by one: row counts around multiples of four, strides forward, backward, overlapping
// (unpack: the later row wins) and zero, alone and under an outer dim (issue 25's
// {float@0, int@8} struct resized to 16 B is rows of 4 B, 8 B apart).
TEST(DtypeEngine, NarrowRowsInFours) {
  std::mt19937_64 rng(29);
  for (int64_t w : {1, 2, 4, 8}) {
    for (int64_t n : {4, 5, 7, 8, 9, 33}) {
      for (int64_t s : {2 * w, w + 3, -(w + 5), w > 1 ? w - 1 : 0, int64_t{0}}) {
        for (int outer = 0; outer <= 1; ++outer) {
          Node l = Node::leaf(600, w);
          if (outer) l.dim[l.nd++] = {3, -(40 * (w + 5) + 16)};
          l.dim[l.nd++] = {n, s};
          Built b = build(Seq{l}, 3000);
          SCOPED_TRACE(dtype::to_string(Seq{l}));
          check_same(b, 1, -3000, 8000, rng);
          check_same(b, 2, -3000, 8000, rng);
        }
      }
    }
  }
}

// Narrow rows (up to 16 B) a cache line or more apart unpack with a write prefetch kAhead (8)
// rows ahead (host backend): runs shorter and longer than that distance, strides forward and
// backward, just below a line (no prefetch) and above, under 0-2 outer dims; every byte must
// land exactly where the reference scatter puts it, and nothing outside.
TEST(DtypeEngine, UnpackNarrowRowsFarApart) {
  std::mt19937_64 rng(19);
  for (int64_t w : {1, 2, 4, 8, 12, 16, 24}) {
    for (int64_t n : {1, 5, 8, 9, 10, 64}) {
      for (int64_t s : {int64_t{63}, int64_t{64}, int64_t{544}, int64_t{-64}, int64_t{-544}}) {
        for (int outer = 0; outer <= 2; ++outer) {
          Node l = Node::leaf(0, w);
          const int64_t as = s < 0 ? -s : s, row_span = (n - 1) * as + w;
          for (int d = 0; d < outer; ++d) l.dim[l.nd++] = {3, (d ? -1 : 1) * (row_span + 40) * (d ? 4 : 1)};
          l.dim[l.nd++] = {n, s};
          const int64_t span = 16 * (row_span + 40) + 64;
          Built b = build(Seq{l}, 2 * span);
          SCOPED_TRACE(dtype::to_string(Seq{l}));
          check_same(b, 1, -span, span, rng);
          check_same(b, 2, -span, 3 * span, rng);
        }
      }
    }
  }
}

// Records of a few small blocks: a leaf whose innermost dim has 2-4 points of 1-16 B under an
// outer dim (a resized struct {float, int} with a gap, `count` times) runs the unrolled
// short-row kernel; strides forward, backward, overlapping (unpack: the later block wins) and
// zero.
TEST(DtypeEngine, ShortRows) {
  std::mt19937_64 rng(17);
  for (int64_t w = 1; w <= 17; ++w) {
    for (int n = 2; n <= 5; ++n) {
      for (int64_t s : {w + 12, -(w + 5), w > 1 ? w - 1 : 0, int64_t{0}}) {
        Node l = Node::leaf(200, w);
        l.nd = 2;
        l.dim[0] = {7, 5 * (w + 12) + 40};
        l.dim[1] = {n, s};
        Built b = build(Seq{l}, 11 * (w + 12) + 80);
        SCOPED_TRACE(dtype::to_string(Seq{l}));
        ASSERT_EQ(b.prog.items.size(), 1u);
        ASSERT_EQ(b.prog.items[0].nd, 2);  // the short row survives simplification
        ASSERT_EQ(b.prog.items[0].cnt[1], n);
        check_same(b, 1, 0, 100 * (w + 12) + 400, rng);
        check_same(b, 3, 0, 100 * (w + 12) + 400, rng);
      }
    }
  }
}

// Small records: 2-4 equal runs of 1-16 B (the unrolled gather) and 2-8 runs of differing
// lengths up to 16 B (a struct {double, char} with gaps: the size-class kernels, two
// overlapping moves per run), every pair of classes for 2 runs, random lengths for 3-9 runs
// (9 runs and lengths of 17 take the memcpy path), runs overlapping (unpack: the later run
// wins), repeated at many points and alone in a group.
TEST(DtypeEngine, MixedSmallRecords) {
  std::mt19937_64 rng(23);
  const int64_t lens[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16};
  auto run = [&](const std::vector<int64_t>& l) {
    Node g;
    g.kind = Node::Gather;
    for (int64_t len : l) g.runs.push_back({static_cast<int64_t>(rng() % 100), len});
    g.nd = 1;
    g.dim[0] = {9, 140};
    Built b = build(Seq{g}, 9 * 140 + 24);
    SCOPED_TRACE(dtype::to_string(Seq{g}));
    check_same(b, 1, 0, 4000, rng);
    check_same(b, 4, 0, 8000, rng);
    // The same record once per point of a group (the gather itself without dims).
    Node grp;
    grp.kind = Node::Group;
    grp.kids = {g, Node::leaf(130, 3)};
    grp.kids[0].nd = 0;
    grp.nd = 1;
    grp.dim[0] = {5, -150};
    Built c = build(Seq{grp}, 40);
    SCOPED_TRACE(dtype::to_string(Seq{grp}));
    check_same(c, 3, -800, 400, rng);
  };
  for (int64_t w = 1; w <= 17; ++w)
    for (size_t n = 2; n <= 5; ++n) run(std::vector<int64_t>(n, w));
  for (int64_t a : lens)
    for (int64_t b : lens) run({a, b});
  for (int k = 0; k < 400; ++k) {
    std::vector<int64_t> l(static_cast<size_t>(3 + k % 7));
    for (int64_t& x : l) x = 1 + static_cast<int64_t>(rng() % (k % 10 == 9 ? 17 : 16));
    run(l);
  }
}

TEST(DtypeEngine, PrefixUnpackStopsAtTheByte) {
  Node n = Node::leaf(0, 3);
  n.dim[n.nd++] = {4, 10};
  Built b = build(Seq{n}, 50);
  std::vector<char> packed(24);
  for (int i = 0; i < 24; ++i) packed[i] = static_cast<char>('a' + i);
  std::vector<char> dst(100, '.');
  device::host().unpack_prefix(b.view, packed.data(), 14, 2, dst.data());
  // element 0: runs at 0,10,20,30 (12 bytes); element 1 at 50: 2 more bytes.
  std::string want(53, '.');
  want.replace(0, 3, "abc");
  want.replace(10, 3, "def");
  want.replace(20, 3, "ghi");
  want.replace(30, 3, "jkl");
  want.replace(50, 2, "mn");
  EXPECT_EQ(std::string(dst.data(), 53), want);
}

TEST(DtypeSimplify, CanonicalRules) {
  // vector(2, 2, 3) of 8-byte elements vs hand-written equivalents
  Node a = Node::leaf(0, 8);
  a.nd = 2;
  a.dim[0] = {2, 24};
  a.dim[1] = {2, 8};
  Seq s{a};
  dtype::simplify(s);
  EXPECT_EQ(dtype::to_string(s), "leaf 16@0 [2x+24]");
  Seq t{Node::leaf(0, 16), Node::leaf(24, 16)};
  dtype::simplify(t);
  EXPECT_EQ(t, s);
  // count-1 dims vanish, dense dims fold, continuing dims merge
  Node c = Node::leaf(8, 4);
  c.nd = 3;
  c.dim[0] = {1, 999};
  c.dim[1] = {3, 32};
  c.dim[2] = {4, 8};
  Seq u{c};
  dtype::simplify(u);
  EXPECT_EQ(dtype::to_string(u), "leaf 4@8 [12x+8]");
  // a single-child group disappears into its child
  Node g;
  g.kind = Node::Group;
  g.off = 100;
  g.nd = 1;
  g.dim[0] = {5, 1000};
  g.kids = {Node::leaf(4, 8)};
  Seq v{g};
  dtype::simplify(v);
  EXPECT_EQ(dtype::to_string(v), "leaf 8@104 [5x+1000]");
  // adjacent runs join; empty runs vanish
  Seq w{Node::leaf(0, 4), Node::leaf(4, 4), Node::leaf(8, 0), Node::leaf(8, 8)};
  dtype::simplify(w);
  EXPECT_EQ(dtype::to_string(w), "leaf 16@0");
}

TEST(DtypeSizes, BeyondTwoToThe31) {
  // 2^20 elements of 4 KiB: 4 GiB, fine in 64 bits, refused where an int must hold it.
  EXPECT_EQ(dtype::packed_bytes(int64_t{1} << 20, 4096), int64_t{1} << 32);
  EXPECT_EQ(dtype::packed_bytes(int64_t{1} << 20, 4096, INT_MAX), -1);
  EXPECT_EQ(dtype::packed_bytes(INT64_MAX / 2, 4), -1);
  EXPECT_EQ(dtype::packed_bytes(0, 1 << 30), 0);
  EXPECT_EQ(dtype::packed_bytes(-1, 4), -1);
  // Offsets and strides of a 3-D point beyond 2^32 bytes.
  device::Item it;
  it.nd = 3;
  it.cnt[0] = 3; it.str[0] = int64_t{1} << 32;
  it.cnt[1] = 1 << 20; it.str[1] = 4096;
  it.cnt[2] = 7; it.str[2] = -8;
  const int64_t p = (2 * (int64_t{1} << 20) + 5) * 7 + 6;
  EXPECT_EQ(device::point_offset(it, p), 2 * (int64_t{1} << 32) + 5 * 4096 - 48);
  // compact_dims merges without overflow and keeps the byte count in 64 bits.
  device::Item big;
  big.kind = device::ItemKind::Leaf;
  big.width = 1 << 12;
  big.nd = 2;
  big.cnt[0] = 1 << 12; big.str[0] = int64_t{1} << 24;
  big.cnt[1] = 1 << 12; big.str[1] = 1 << 12;
  ASSERT_TRUE(device::compact_dims(big));
  EXPECT_EQ(big.nd, 0);
  EXPECT_EQ(big.width, int64_t{1} << 36);
  EXPECT_EQ(big.bytes, int64_t{1} << 36);
}

// The point-to-point rule: packing needs the end-to-end lines to favour it *and* the engine's
// pack + unpack + two dense copies to beat the MPI's own pack + unpack.
TEST(DtypePlanner, PackOnlyWhereThePackLinesAllowIt) {
  dtype::TuneModel m;
  m.engine_pack = m.engine_unpack = {0, 0.025, 0.2};
  m.mpi_p2p = {0, 1.5, 4};  // end to end: the derived type looks slow at every size
  m.contig_p2p = {400, 0.1, 0};
  const dtype::Size small_runs{65536, 4096}, large_runs{65536, 128};  // 16 B and 512 B runs
  m.mpi_pack = m.mpi_unpack = {0, 0.025, 2};  // an MPI datatype engine at memory speed per byte
  EXPECT_TRUE(dtype::p2p_pays(m, small_runs));
  EXPECT_FALSE(dtype::p2p_pays(m, large_runs));
  m.mpi_pack = m.mpi_unpack = {0, 0.3, 1};  // a slow one: both pay
  EXPECT_TRUE(dtype::p2p_pays(m, small_runs));
  EXPECT_TRUE(dtype::p2p_pays(m, large_runs));
  m.mpi_p2p = {0, 0.1, 0};  // the end-to-end lines say no: no
  EXPECT_FALSE(dtype::p2p_pays(m, small_runs));
  m.mpi_p2p = {0, 1.5, 4};
  m.min_bytes = 1 << 20;
  EXPECT_FALSE(dtype::p2p_pays(m, small_runs));
}

// The built-in model is the one for the MPI this was built against (Open MPI's convertor is
// near memory speed for 512-byte runs, MPICH's datatype path is not).
TEST(DtypePlanner, BuiltinModelMatchesTheMpi) {
  const dtype::TuneModel m = dtype::builtin_model();
#if defined(OMPI_MAJOR_VERSION)
  EXPECT_FALSE(dtype::p2p_pays(m, {65536, 128}));
#else
  EXPECT_TRUE(dtype::p2p_pays(m, {65536, 128}));
#endif
  EXPECT_TRUE(dtype::p2p_pays(m, {65536, 4096}));
}

// Device buffers: the kernels (pack + one copy of the packed bytes) against host copies of the
// span (an MPI that is not GPU-aware) or the MPI's own handling of the device layout (GPU-aware),
// with the rates of a tune file's "device" object, which round-trips through the writer.
TEST(DtypePlanner, DeviceKernelsAgainstStagingAndTheMpi) {
  dtype::TuneModel m;
  std::string err;
  ASSERT_TRUE(dtype::apply_tune_object(R"({"device": {"kernel_pack": {"overhead_ns": 9000, "ns_per_byte": 0.001},
      "kernel_unpack": {"overhead_ns": 9000, "ns_per_byte": 0.001}, "copy": {"overhead_ns": 10000, "ns_per_byte": 0.04},
      "mpi_pack": {"overhead_ns": 10000, "ns_per_byte": 0.04, "ns_per_block": 2000}}})", m, err)) << err;
  EXPECT_TRUE(m.device.measured);
  EXPECT_EQ(m.device.kernel_pack.overhead_ns, 9000);
  EXPECT_EQ(m.device.mpi_pack.ns_per_block, 2000);
  m.engine_pack = m.engine_unpack = {0, 0.025, 0.2};
  // 1 MiB in 64 Ki runs of 16 B spread over 2 MiB.
  const dtype::DeviceCase send{{1 << 20, 65536}, 2 << 20, true, false};
  EXPECT_TRUE(dtype::device_kernels_pay(m, send));                                 // half the copy
  EXPECT_TRUE(dtype::device_kernels_pay(m, {send.size, send.span, true, true}));   // a copy per run
  // A small message in a small span: one staging copy beats a launch plus a copy.
  const dtype::DeviceCase tiny{{64, 4}, 128, true, false};
  EXPECT_FALSE(dtype::device_kernels_pay(m, tiny));
  // A slow kernel line sends even the large message to the host copies; a receive pays two.
  m.device.kernel_pack.ns_per_byte = m.device.kernel_unpack.ns_per_byte = 0.2;
  EXPECT_FALSE(dtype::device_kernels_pay(m, send));
  EXPECT_TRUE(dtype::device_kernels_pay(m, {{1 << 20, 65536}, 8 << 20, false, false}));
  // Written back as the same object.
  dtype::TuneModel back;
  const std::string doc = dtype::tune_to_json(m, "", "");
  const size_t at = doc.find("\"p2p\"");
  ASSERT_NE(at, std::string::npos);
  const size_t open = doc.find('{', at);
  int depth = 0;
  size_t end = open;
  for (; end < doc.size(); ++end) {
    depth += doc[end] == '{' ? 1 : doc[end] == '}' ? -1 : 0;
    if (depth == 0) break;
  }
  ASSERT_TRUE(dtype::apply_tune_object(doc.substr(open, end - open + 1), back, err)) << err;
  EXPECT_TRUE(back.device.measured);
  EXPECT_EQ(back.device.kernel_pack.ns_per_byte, 0.2);
  EXPECT_EQ(back.device.copy.overhead_ns, 10000);
  // Without a "device" object: the built-ins, not marked measured.
  EXPECT_FALSE(dtype::builtin_model().device.measured);
}

}  // namespace
}  // namespace hier::test
