// The quantized schedules (sched/build_quant.cpp) of every rank, walked together by the simulator
// (simulator.hpp: float64 values, the host quantization kernels), without MPI: every rank's
// result is the same bits, and within the documented bound of the float64 sum / the input
// (docs/quantization.md); the schedules match across ranks (counts, kinds), never deadlock, and
// stay inside their buffers. Pipelined (QuantParams::chunks, sched/pipeline.hpp): the same, and
// the chunked result is the unchunked one bit for bit (the chunks are cut at block boundaries, so
// every block is summed and quantized alike; the simulator's reductions sum in one fixed order).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "quant/format.hpp"
#include "sched/build.hpp"
#include "sched/pipeline.hpp"
#include "simulator.hpp"
#include "topo/table.hpp"

namespace coll_test {
namespace {

using hier::sched::QuantParams;
using hier::sched::Schedule;
using hier::topo::Shape;

constexpr int64_t kB = 64;  // a small block: several blocks per piece at small counts

double slack(int Q) { return (1 + Q * std::ldexp(1.0, -20)) * (1 + std::ldexp(1.0, -22)); }

double value(int rank, int64_t i) {
  static constexpr double kScale[] = {1e-3, 1e-1, 1.0, 1e1, 1e3};
  return std::sin(0.37 * (rank + 1) + 0.011 * static_cast<double>(i)) * kScale[(i / 50 + rank) % 5];
}

int64_t bits_of(double x) { return std::bit_cast<int64_t>(x); }
double val(int64_t b) { return std::bit_cast<double>(b); }

struct Case {
  int P, L;
};
std::vector<Case> shapes() { return {{4, 2}, {6, 2}, {6, 3}, {8, 4}, {8, 2}}; }
Shape shape_of(const Case& c) { return hier::topo::analyze(hier::topo::make_table(c.P, {{"node", c.L, {}}})); }

QuantParams params(int bits) {
  QuantParams q;
  q.bits = bits;
  q.block = kB;
  return q;
}

std::string name(const Case& c, int bits, int64_t n) {
  return std::to_string(c.P / c.L) + " nodes x " + std::to_string(c.L) + ", int" + std::to_string(bits) + ", " +
         std::to_string(n) + " values";
}

// Sum over nodes of the largest |node partial sum| of values [b0, b1) at offset `first`.
double node_absmax_sum(const Case& c, int64_t first, int64_t b0, int64_t b1) {
  double A = 0;
  for (int m = 0; m < c.P / c.L; ++m) {
    double mx = 0;
    for (int64_t i = b0; i < b1; ++i) {
      double s = 0;
      for (int r = m * c.L; r < (m + 1) * c.L; ++r) s += value(r, first + i);
      mx = std::max(mx, std::fabs(s));
    }
    A += mx;
  }
  return A;
}

TEST(QuantSchedules, AllreduceWithinBoundSameBits) {
  const double eps = std::numeric_limits<double>::epsilon();
  for (const Case& c : shapes())
    for (int bits : {8, 4})
      for (int64_t n : {int64_t{1}, int64_t{37}, int64_t{1031}, int64_t{4101}})
        for (bool in_place : {false, true}) {
          const Shape s = shape_of(c);
          const std::string what = "allreduce " + name(c, bits, n) + (in_place ? " in place" : "");
          const int Q = hier::quant::qmax(bits);
          std::vector<Schedule> sc;
          std::vector<RankData> d(c.P);
          for (int r = 0; r < c.P; ++r) {
            sc.push_back(hier::sched::build_quant_allreduce(s, r, n, in_place, params(bits)));
            std::vector<int64_t> x(n);
            for (int64_t i = 0; i < n; ++i) x[i] = bits_of(value(r, i));
            if (in_place) d[r].recv = x;
            else {
              d[r].send = x;
              d[r].recv.assign(n, bits_of(-12345.0));
            }
          }
          const std::string err = simulate(s, sc, d);
          ASSERT_EQ(err, "") << what << "\n" << hier::sched::to_string(sc[0]);
          for (int r = 1; r < c.P; ++r) ASSERT_EQ(d[r].recv, d[0].recv) << what << ": rank " << r << " differs";
          int bad = 0;
          for (int64_t b0 = 0; b0 < n && bad < 3; b0 += kB) {
            const int64_t b1 = std::min(n, b0 + kB);
            const double A = node_absmax_sum(c, 0, b0, b1);
            for (int64_t i = b0; i < b1 && bad < 3; ++i) {
              double ref = 0, mag = 0;
              for (int r = 0; r < c.P; ++r) {
                ref += value(r, i);
                mag += std::fabs(value(r, i));
              }
              const double bound = A / (2.0 * Q) * (2.0 + 1.0 / (2.0 * Q)) * slack(Q) + eps * (c.P + 2) * (mag + 2 * A);
              if (!(std::fabs(val(d[0].recv[i]) - ref) <= bound)) {
                ++bad;
                ADD_FAILURE() << what << " element " << i << ": " << val(d[0].recv[i]) << " vs " << ref << " (bound "
                              << bound << ")";
              }
            }
          }
        }
}

TEST(QuantSchedules, ReduceScatterWithinBoundSameOrder) {
  const double eps = std::numeric_limits<double>::epsilon();
  for (const Case& c : shapes())
    for (int bits : {8, 4})
      for (int64_t base : {int64_t{0}, int64_t{5}, int64_t{300}})
        for (bool uneven : {false, true}) {
          const Shape s = shape_of(c);
          std::vector<int64_t> counts(c.P, base);
          if (uneven)
            for (int r = 0; r < c.P; ++r) counts[r] = r % 3 == 1 ? 0 : base + 37 * r;
          int64_t total = 0;
          std::vector<int64_t> first(c.P);
          for (int r = 0; r < c.P; ++r) {
            first[r] = total;
            total += counts[r];
          }
          const std::string what = "reduce_scatter " + name(c, bits, total) + (uneven ? " uneven" : "");
          const int Q = hier::quant::qmax(bits);
          std::vector<Schedule> sc;
          std::vector<RankData> d(c.P);
          for (int r = 0; r < c.P; ++r) {
            sc.push_back(hier::sched::build_quant_reduce_scatter(s, r, counts, false, params(bits)));
            d[r].send.resize(total);
            for (int64_t i = 0; i < total; ++i) d[r].send[i] = bits_of(value(r, i));
            d[r].recv.assign(counts[r], bits_of(-12345.0));
          }
          const std::string err = simulate(s, sc, d);
          ASSERT_EQ(err, "") << what << "\n" << hier::sched::to_string(sc[0]);
          int bad = 0;
          for (int r = 0; r < c.P && bad < 3; ++r)
            for (int64_t b0 = 0; b0 < counts[r] && bad < 3; b0 += kB) {
              const int64_t b1 = std::min(counts[r], b0 + kB);
              const double A = node_absmax_sum(c, first[r], b0, b1);
              for (int64_t i = b0; i < b1 && bad < 3; ++i) {
                double ref = 0, mag = 0;
                for (int q = 0; q < c.P; ++q) {
                  ref += value(q, first[r] + i);
                  mag += std::fabs(value(q, first[r] + i));
                }
                const double bound = A / (2.0 * Q) * slack(Q) + eps * (c.P + 2) * (mag + A);
                if (!(std::fabs(val(d[r].recv[i]) - ref) <= bound)) {
                  ++bad;
                  ADD_FAILURE() << what << " rank " << r << " element " << i << ": " << val(d[r].recv[i]) << " vs "
                                << ref << " (bound " << bound << ")";
                }
              }
            }
        }
}

TEST(QuantSchedules, AllgatherWithinBoundSameBits) {
  for (const Case& c : shapes())
    for (int bits : {8, 4})
      for (int64_t cnt : {int64_t{1}, int64_t{63}, int64_t{700}})
        for (bool staged : {false, true}) {
          const Shape s = shape_of(c);
          const std::string what = "allgather " + name(c, bits, cnt) + (staged ? " staged" : "");
          const int Q = hier::quant::qmax(bits);
          std::vector<Schedule> sc;
          std::vector<RankData> d(c.P);
          for (int r = 0; r < c.P; ++r) {
            sc.push_back(hier::sched::build_quant_allgather(s, r, cnt, staged, params(bits)));
            d[r].send_blocks.assign(c.P, {});
            d[r].send_blocks[r].resize(cnt);
            for (int64_t i = 0; i < cnt; ++i) d[r].send_blocks[r][i] = bits_of(value(r, i));
            d[r].recv.assign(staged ? 0 : cnt * c.P, bits_of(-12345.0));
            d[r].recv_blocks.assign(c.P, {});
          }
          const std::string err = simulate(s, sc, d);
          ASSERT_EQ(err, "") << what << "\n" << hier::sched::to_string(sc[0]);
          // The result of rank r, dense: its recv, or its stored blocks.
          auto got = [&](int r) {
            if (!staged) return d[r].recv;
            std::vector<int64_t> v;
            for (const auto& b : d[r].recv_blocks) v.insert(v.end(), b.begin(), b.end());
            return v;
          };
          const std::vector<int64_t> g0 = got(0);
          ASSERT_EQ(static_cast<int64_t>(g0.size()), cnt * c.P) << what;
          for (int r = 1; r < c.P; ++r) ASSERT_EQ(got(r), g0) << what << ": rank " << r << " differs";
          int bad = 0;
          for (int q = 0; q < c.P && bad < 3; ++q)
            for (int64_t b0 = 0; b0 < cnt && bad < 3; b0 += kB) {
              const int64_t b1 = std::min(cnt, b0 + kB);
              double mx = 0;
              for (int64_t i = b0; i < b1; ++i) mx = std::max(mx, std::fabs(value(q, i)));
              const double bound = mx / (2.0 * Q) * slack(Q);
              for (int64_t i = b0; i < b1 && bad < 3; ++i)
                if (!(std::fabs(val(g0[q * cnt + i]) - value(q, i)) <= bound)) {
                  ++bad;
                  ADD_FAILURE() << what << " block of rank " << q << " element " << i << ": " << val(g0[q * cnt + i])
                                << " vs " << value(q, i) << " (bound " << bound << ")";
                }
            }
        }
}

// Chunked schedules: shapes 2x2, 2x4, 4x2 and 3x3 (nodes x ranks per node); counts that are and
// are not block multiples (odd ones for int4's half-byte values); chunk counts that do and do not
// divide the blocks, and more chunks than blocks (the call stays unchunked).
std::vector<Case> chunk_shapes() { return {{4, 2}, {8, 4}, {8, 2}, {9, 3}}; }

// The result of every rank of one walk (schedules from `build(rank)`), or a failure.
template <class Build>
std::vector<RankData> walk(const Shape& s, const Case& c, const Build& build, std::vector<RankData> d,
                           const std::string& what, int want_chunks) {
  std::vector<Schedule> sc;
  for (int r = 0; r < c.P; ++r) sc.push_back(build(r));
  for (int r = 0; r < c.P; ++r) {
    EXPECT_EQ(sc[r].chunks, want_chunks) << what << " rank " << r;
    // Every quantization's residual range inside the schedule's residual.
    for (const auto& st : sc[r].steps) {
      if (st.residual >= 0) {
        EXPECT_LE(st.residual + st.count, sc[r].residual) << what << " rank " << r;
      }
    }
  }
  const std::string err = simulate(s, sc, d);
  EXPECT_EQ(err, "") << what << "\n" << hier::sched::to_string(sc[0]);
  return d;
}

// Every rank's input, `len` values of value(r, i): in Recv in place, else in Send with `out`
// values of garbage in Recv.
std::vector<RankData> inputs(const Case& c, int64_t len, int64_t out, bool in_place) {
  std::vector<RankData> d(c.P);
  for (int r = 0; r < c.P; ++r) {
    std::vector<int64_t> x(len);
    for (int64_t i = 0; i < len; ++i) x[i] = bits_of(value(r, i));
    if (in_place) d[r].recv = x;
    else {
      d[r].send = x;
      d[r].recv.assign(out, bits_of(-12345.0));
    }
  }
  return d;
}

// The results of the walk unchunked and in `chunks` chunks (build(rank, params)); `units`: what
// is cut into chunks (at most one per block: more give the unchunked schedule).
template <class Build>
std::pair<std::vector<RankData>, std::vector<RankData>> one_and_chunked(const Shape& s, const Case& c, QuantParams q,
                                                                        int chunks, int64_t units, const Build& build,
                                                                        const std::vector<RankData>& d,
                                                                        const std::string& what) {
  auto one = walk(s, c, [&](int r) { return build(r, q); }, d, what + " (unchunked)", 1);
  q.chunks = chunks;
  const int64_t blocks = (units + kB - 1) / kB;
  auto many = walk(s, c, [&](int r) { return build(r, q); }, d, what, chunks <= blocks ? chunks : 1);
  return {std::move(one), std::move(many)};
}

TEST(QuantSchedules, PipelinedAllreduceEqualsUnchunked) {
  for (const Case& c : chunk_shapes())
    for (int bits : {8, 4})
      for (int64_t n : {kB * 12, kB * 12 + 37, int64_t{4101}})
        for (int chunks : {2, 3, 5, 1000})
          for (bool in_place : {false, true}) {
            const Shape s = shape_of(c);
            const std::string what = "allreduce " + name(c, bits, n) + ", " + std::to_string(chunks) + " chunks" +
                                     (in_place ? " in place" : "");
            const auto [one, many] = one_and_chunked(
                s, c, params(bits), chunks, n,
                [&](int r, const QuantParams& q) { return hier::sched::build_quant_allreduce(s, r, n, in_place, q); },
                inputs(c, n, n, in_place), what);
            for (int r = 0; r < c.P; ++r) ASSERT_EQ(many[r].recv, one[0].recv) << what << ": rank " << r;
          }
}

TEST(QuantSchedules, PipelinedReduceScatterBlockEqualsUnchunked) {
  for (const Case& c : chunk_shapes())
    for (int bits : {8, 4})
      for (int64_t cnt : {kB * 4, kB * 4 + 5, int64_t{301}})
        for (int chunks : {2, 3, 7})
          for (bool in_place : {false, true}) {
            const Shape s = shape_of(c);
            const int64_t total = cnt * c.P;
            const std::string what = "reduce_scatter_block " + name(c, bits, total) + ", " + std::to_string(chunks) +
                                     " chunks" + (in_place ? " in place" : "");
            const std::vector<int64_t> counts(c.P, cnt);
            QuantParams qp = params(bits);
            qp.block_variant = true;
            const auto [one, many] = one_and_chunked(
                s, c, qp, chunks, cnt,
                [&](int r, const QuantParams& q) { return hier::sched::build_quant_reduce_scatter(s, r, counts, in_place, q); },
                inputs(c, total, cnt, in_place), what);
            for (int r = 0; r < c.P; ++r) {
              ASSERT_GE(static_cast<int64_t>(many[r].recv.size()), cnt) << what;
              ASSERT_TRUE(std::equal(one[r].recv.begin(), one[r].recv.begin() + cnt, many[r].recv.begin()))
                  << what << ": rank " << r << " differs from the unchunked result";
            }
            // The unchunked result is the one the bound tests above check; spot-check it here too:
            // rank r's piece is the node-ordered sum, within the reduce-scatter bound (int4: 1/14
            // of the node sums' largest magnitude, times the nodes).
            const int Q = hier::quant::qmax(bits);
            for (int r = 0; r < c.P; ++r)
              for (int64_t i = 0; i < cnt; i += 17) {
                double ref = 0;
                for (int p = 0; p < c.P; ++p) ref += value(p, r * cnt + i);
                const int64_t b0 = i / kB * kB, b1 = std::min(cnt, b0 + kB);
                const double A = node_absmax_sum(c, r * cnt, b0, b1);
                EXPECT_LE(std::fabs(val(many[r].recv[i]) - ref), A / (2.0 * Q) * slack(Q) + 1e-9 * (1 + A))
                    << what << " rank " << r << " element " << i;
              }
          }
}

// The split at block boundaries: every chunk but the last a multiple of the block.
TEST(QuantSchedules, SplitAlignedAtBlocks) {
  const auto sp = hier::sched::split_aligned(1000, 3, 64);  // 16 blocks: 6, 5, 5
  EXPECT_EQ(sp.counts, (std::vector<int64_t>{384, 320, 296}));
  EXPECT_EQ(sp.displs, (std::vector<int64_t>{0, 384, 704}));
  EXPECT_EQ(hier::sched::split_aligned(10, 3, 1).counts, hier::sched::split_even(10, 3).counts);
  EXPECT_EQ(hier::sched::chunk_count(1000, 4000, 1000, 64), 4);
  EXPECT_EQ(hier::sched::chunk_count(100, 400, 10, 64), 2);  // at most one chunk per block
  EXPECT_EQ(hier::sched::chunk_count(64, 256, 10, 64), 1);
}

// HIER_DEBUG=TRACE's form of a quantized schedule names the new kinds and their attributes.
TEST(QuantSchedules, PrintsQuantSteps) {
  const Shape s = shape_of({4, 2});
  const std::string t = hier::sched::to_string(hier::sched::build_quant_allreduce(s, 1, 1000, false, params(8)));
  for (const char* k : {"allreduce/quant-int8", "int8 block 64", "quantize", "alltoallv on cross", "dequantize_reduce",
                        "dequantize", "records+", "rcounts=", "residual+0"})
    EXPECT_NE(t.find(k), std::string::npos) << k << " not in\n" << t;
  // Pipelined: the chunk count, the waves (the node allgathers records), and the second chunk's own
  // records and residual.
  QuantParams q = params(8);
  q.chunks = 2;
  const Schedule p = hier::sched::build_quant_allreduce(s, 1, 1000, false, q);
  const std::string tp = hier::sched::to_string(p);
  for (const char* k : {"2 chunks pipelined", "[wave 0] reduce_scatter on node", "[wave 7] allgatherv on node in place -> records+"})
    EXPECT_NE(tp.find(k), std::string::npos) << k << " not in\n" << tp;
  const Schedule one = hier::sched::build_quant_allreduce(s, 1, 512, false, params(8));
  int64_t max_residual = -1, max_records = -1;
  for (const auto& st : p.steps) {
    max_residual = std::max(max_residual, st.residual);
    if (st.dst.buf == hier::sched::Buf::Records) max_records = std::max(max_records, st.dst.off);
  }
  EXPECT_GE(max_residual, one.residual) << tp;  // the second chunk's residual follows the first's
  EXPECT_GE(max_records, one.records) << tp;
}

}  // namespace
}  // namespace coll_test
