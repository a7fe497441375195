// src/quant on 16-bit floats (quant/f16.hpp: _Float16, MPICH's MPIX_C_FLOAT16): the records are
// those of the same values as float32, byte for byte; the per-value bound of quant/kernels.hpp
// with the one rounding to 16 bits; zeros, subnormals, values near 65504, NaN/Inf, odd int4
// counts; the sum in float (dequantize_sum) rounded once, against float64. Built on both MPIs
// (no MPI here): where the compiler has no 16-bit float every test skips, saying so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "quant/format.hpp"
#include "quant/quant.hpp"
#include "quant_testing.hpp"

#if HIER_QUANT_F16
namespace {

using hq::f16;

// The documented bound for f16 (quant/kernels.hpp): the float bound plus half an f16 ulp of the
// dequantized value, |v| <= absmax (1 + 2^-20).
double bound16(float s, double absmax, int bits) {
  return double(s) * (0.5 + hq::qmax(bits) * std::ldexp(1.0, -21)) + std::ldexp(absmax, -11) + std::ldexp(1.0, -25);
}

double d(f16 v) { return static_cast<double>(v); }

std::vector<float> as_float(const std::vector<f16>& x) {
  std::vector<float> f(x.size());
  for (size_t i = 0; i < x.size(); ++i) f[i] = static_cast<float>(x[i]);
  return f;
}

// random_values in f16's range: scales 2^-22 .. 2^14 (from f16's subnormals to its largest
// values), magnitudes clamped to 65504, some exact zeros.
const Spread kF16Spread{.emin = -22, .emax = 14, .maxabs = 65504, .zeros = true};

// Every value against the f16 bound; the records equal those of the values as float32; the f16
// result is the float32 result rounded to 16 bits (the one rounding).
void check16(const std::vector<f16>& x, int64_t b, int bits) {
  const int64_t n = static_cast<int64_t>(x.size());
  const Bytes q = quantize(x, b, bits);
  const std::vector<float> xf = as_float(x);
  ASSERT_EQ(q, quantize(xf, b, bits)) << "f16 records differ from float32's, n=" << n << " b=" << b;
  const std::vector<f16> y = dequantize<f16>(q, n, b, bits);
  std::vector<float> yf(n);
  hq::dequantize(q.data(), n, b, bits, yf.data());
  for (int64_t k = 0; k < hq::num_blocks(n, b); ++k) {
    const float s = scale_of(q, k, b, bits);
    const int64_t len = hq::block_len(k, n, b);
    double a = 0;
    for (int64_t i = 0; i < len; ++i) a = std::max(a, std::fabs(d(x[k * b + i])));
    ASSERT_TRUE(std::isfinite(s) && s >= 0 && (a == 0) == (s == 0)) << "block " << k << " s=" << s;
    for (int64_t i = 0; i < len; ++i) {
      const int64_t g = k * b + i;
      ASSERT_TRUE(std::isfinite(d(y[g])));
      ASSERT_EQ(d(y[g]), d(static_cast<f16>(yf[g]))) << "not the float result rounded once, i=" << g;
      ASSERT_LE(std::fabs(d(x[g]) - d(y[g])), bound16(s, a, bits))
          << "n=" << n << " b=" << b << " bits=" << bits << " i=" << g << " x=" << d(x[g]) << " deq=" << d(y[g])
          << " s=" << s;
    }
  }
}

}  // namespace

// The kernels' own conversions (quant/f16.hpp: by bits, vectorizable) against the compiler's:
// every f16 widened, and floats narrowed across the whole range (a stride through all 2^32 bit
// patterns, and every float near each boundary: 2^-25, the f16 subnormal / normal edge 2^-14,
// 65504 .. 65536, Inf / NaN). NaN: any NaN.
TEST(QuantF16, ConversionsAreTheCompilers) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t hh = static_cast<uint16_t>(h);
    f16 x;
    std::memcpy(&x, &hh, 2);
    const float a = hq::widen(x), b = static_cast<float>(x);
    if (std::isnan(b)) ASSERT_TRUE(std::isnan(a)) << std::hex << h;
    else ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << std::hex << h << ": " << a << " vs " << b;
  }
  auto check = [](uint32_t f) {
    float x;
    std::memcpy(&x, &f, 4);
    const f16 a = hq::narrow16(x), b = static_cast<f16>(x);
    if (std::isnan(x)) return std::isnan(d(a));
    return std::memcmp(&a, &b, 2) == 0;
  };
  for (uint64_t u = 0; u <= 0xffffffffull; u += 65537) ASSERT_TRUE(check(static_cast<uint32_t>(u))) << std::hex << u;
  for (uint32_t edge : {0x33000000u, 0x38800000u, 0x477fe000u, 0x477ff000u, 0x47800000u, 0x7f800000u, 0x00800000u})
    for (uint32_t sign : {0u, 0x80000000u})
      for (uint32_t f = edge - 0x4000u; f <= edge + 0x4000u; ++f) ASSERT_TRUE(check(f | sign)) << std::hex << (f | sign);
  for (uint32_t f = 0x38000000u; f < 0x38800000u; f += 3) ASSERT_TRUE(check(f)) << std::hex << f;  // f16 subnormals
}

TEST(QuantF16, RandomBoundAndSameRecordsAsFloat) {
  std::mt19937_64 rng(16);
  for (int bits : {8, 4})
    for (int64_t b : {8, 64, 512})
      for (int64_t n : counts_for(b))  // odd counts for int4 included
        check16(random_values<f16>(n, rng, kF16Spread), b, bits);
}

TEST(QuantF16, Zeros) {
  for (int bits : {8, 4}) {
    const std::vector<f16> x(101, f16(0));
    const Bytes q = quantize(x, 32, bits);
    for (int64_t k = 0; k < hq::num_blocks(101, 32); ++k) EXPECT_EQ(scale_of(q, k, 32, bits), 0.0f);
    for (f16 v : dequantize<f16>(q, 101, 32, bits)) EXPECT_EQ(d(v), 0.0);
    std::vector<f16> sum(101, f16(7));
    hq::dequantize_sum(q.data(), 0, 3, 101, 32, bits, sum.data());
    for (f16 v : sum) EXPECT_EQ(d(v), 0.0);
  }
}

// f16 subnormals (2^-24 .. 2^-14): the scale is a normal float, every value within the bound.
TEST(QuantF16, Subnormals) {
  for (int bits : {8, 4}) {
    std::vector<f16> x;
    for (int m = 1; m < 1024; m += 7) x.push_back(static_cast<f16>(std::ldexp(double((m % 2) ? m : -m), -24)));
    x.push_back(static_cast<f16>(std::ldexp(1.0, -24)));  // the smallest, alone in the last blocks
    check16(x, 8, bits);
    check16(std::vector<f16>(9, static_cast<f16>(std::ldexp(1.0, -24))), 8, bits);
    const Bytes q = quantize(std::vector<f16>(8, static_cast<f16>(std::ldexp(1.0, -24))), 8, bits);
    EXPECT_GE(scale_of(q, 0, 8, bits), 0x1p-126f);
  }
}

// Values at and near the largest f16 (65504): finite scales, finite results, within the bound.
TEST(QuantF16, Huge) {
  for (int bits : {8, 4}) {
    std::vector<f16> x = {f16(65504), f16(-65504), f16(65472), f16(-1), f16(32768), f16(1e-3), f16(-65504), f16(0)};
    x.push_back(f16(65504));  // odd count
    check16(x, 8, bits);
    check16(std::vector<f16>(17, f16(-65504)), 8, bits);  // a block of one value
    const Bytes q = quantize(std::vector<f16>(8, f16(65504)), 8, bits);
    for (f16 v : dequantize<f16>(q, 8, 8, bits)) EXPECT_LE(std::fabs(d(v) - 65504.0), bound16(scale_of(q, 0, 8, bits), 65504, bits));
  }
}

// A NaN or Inf makes its block NaN (scale NaN, payload zero, counted), in the dequantized values
// and in sums; the other blocks are untouched.
TEST(QuantF16, NonFinite) {
  const f16 specials[] = {static_cast<f16>(std::numeric_limits<float>::quiet_NaN()),
                          static_cast<f16>(std::numeric_limits<float>::infinity()),
                          static_cast<f16>(-std::numeric_limits<float>::infinity())};
  for (int bits : {8, 4})
    for (f16 sp : specials) {
      const Bytes q = quantize_with_special<f16>(41, sp, bits);  // block 1 of 8-value blocks
      const std::vector<f16> y = dequantize<f16>(q, 41, 8, bits);
      std::vector<f16> sum(41);
      hq::dequantize_sum(q.data(), 0, 2, 41, 8, bits, sum.data());
      for (int i = 0; i < 41; ++i) {
        EXPECT_EQ(std::isnan(d(y[i])), i >= 8 && i < 16) << i;
        EXPECT_EQ(std::isnan(d(sum[i])), i >= 8 && i < 16) << i;
      }
    }
}

// The fused dequantize-reduce of f16: P parts summed in float in part order and rounded once.
//  - bit-identical to float dequantize_add of the same records in the same order, rounded to f16;
//  - |sum - sum of the inputs (float64)| <= sum_p s_p (1/2 + Q 2^-21) + (P-1) 2^-24 sum_p |deq_p|
//    + half an f16 ulp of the result (2^-11 |sum| + 2^-25).
TEST(QuantF16, DequantizeSumInFloatRoundedOnce) {
  std::mt19937_64 rng(1616);
  for (int bits : {8, 4})
    for (int P : {1, 2, 3, 8})
      for (int64_t n : {int64_t{1}, int64_t{63}, int64_t{65}, int64_t{1001}, int64_t{4099}}) {
        const int64_t b = 64, rb = hq::quantized_bytes(n, b, bits);
        std::vector<std::vector<f16>> x(P);
        Bytes all(static_cast<size_t>(P * rb));
        std::vector<float> acc(n, 0.0f);
        for (int p = 0; p < P; ++p) {
          x[p] = random_values<f16>(n, rng, kF16Spread);
          for (f16& v : x[p]) v = static_cast<f16>(d(v) / P);  // sums stay finite
          const Bytes q = quantize(x[p], b, bits);
          std::memcpy(all.data() + p * rb, q.data(), q.size());
          hq::dequantize_add(q.data(), n, b, bits, acc.data());
        }
        std::vector<f16> got(n, f16(-1));
        hq::dequantize_sum(all.data(), rb, P, n, b, bits, got.data());
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(d(got[i]), d(static_cast<f16>(acc[i]))) << "P=" << P << " i=" << i;
          double exact = 0, e = 0, sabs = 0;
          for (int p = 0; p < P; ++p) {
            exact += d(x[p][i]);
            const Bytes q(all.begin() + p * rb, all.begin() + (p + 1) * rb);
            const float s = scale_of(q, i / b, b, bits);
            e += double(s) * (0.5 + hq::qmax(bits) * std::ldexp(1.0, -21));
            sabs += double(s) * hq::qmax(bits);
          }
          const double lim = e + (P - 1) * std::ldexp(sabs, -24) + std::ldexp(std::fabs(d(got[i])), -11) + std::ldexp(1.0, -25);
          ASSERT_LE(std::fabs(d(got[i]) - exact), lim) << "P=" << P << " n=" << n << " i=" << i;
        }
      }
}

// A sum past 65504 rounds to Inf, as the exact f16 sum does.
TEST(QuantF16, SumOverflowIsInf) {
  const std::vector<f16> x(8, f16(60000));
  for (int bits : {8, 4}) {
    const Bytes q = quantize(x, 8, bits);
    Bytes two(q);
    two.insert(two.end(), q.begin(), q.end());
    std::vector<f16> s(8);
    hq::dequantize_sum(two.data(), static_cast<int64_t>(q.size()), 2, 8, 8, bits, s.data());
    for (f16 v : s) EXPECT_TRUE(std::isinf(d(v)) && d(v) > 0);
  }
}

#else
TEST(QuantF16, NoHalfFloat) { GTEST_SKIP() << "this compiler has no 16-bit float (quant/f16.hpp): 16-bit floats stay exact"; }
#endif
