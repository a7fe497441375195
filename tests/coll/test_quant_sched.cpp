// The quantized schedules (sched/build_quant.cpp) of every rank, walked together by the simulator
// (simulator.hpp: float64 values, the host quantization kernels), without MPI: every rank's
// result is the same bits, and within the documented bound of the float64 sum / the input
// (docs/quantization.md); the schedules match across ranks (counts, kinds), never deadlock, and
// stay inside their buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "quant/format.hpp"
#include "sched/build.hpp"
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

// HIER_DEBUG=TRACE's form of a quantized schedule names the new kinds and their attributes.
TEST(QuantSchedules, PrintsQuantSteps) {
  const Shape s = shape_of({4, 2});
  const std::string t = hier::sched::to_string(hier::sched::build_quant_allreduce(s, 1, 1000, false, params(8)));
  for (const char* k : {"allreduce/quant-int8", "int8 block 64", "quantize", "alltoallv on cross", "dequantize_reduce",
                        "dequantize", "records+", "rcounts=", "residual+0"})
    EXPECT_NE(t.find(k), std::string::npos) << k << " not in\n" << t;
}

}  // namespace
}  // namespace coll_test
