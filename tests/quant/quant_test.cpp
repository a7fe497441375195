// src/quant: the error bound per value and for sums, the buffer format byte for byte, special
// values (zeros, denormals, huge, constant, NaN/Inf), int4 nibble order and odd counts, and
// determinism. Bounds are the ones documented in quant/kernels.hpp.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <optional>
#include <string>

#include "config/config.hpp"
#include "model/cost_quant.hpp"
#include "quant/format.hpp"
#include "quant/quant.hpp"
#include "quant_testing.hpp"

namespace {

// The documented per-value bound: |x - deq| <= s * (1/2 + Q * 2^-21).
double bound(float s, int bits) { return double(s) * (0.5 + hq::qmax(bits) * std::ldexp(1.0, -21)); }

// Checks every value of x against its dequantized value, every scale against the block's
// absmax, and that no payload holds -128 / -8 (outside the symmetric range).
template <class T>
void check_roundtrip(const std::vector<T>& x, int64_t b, int bits) {
  const int64_t n = static_cast<int64_t>(x.size());
  const Bytes q = quantize(x, b, bits);
  const std::vector<T> y = dequantize<T>(q, n, b, bits);
  const int Q = hq::qmax(bits);
  for (int64_t k = 0; k < hq::num_blocks(n, b); ++k) {
    const float s = scale_of(q, k, b, bits);
    const int64_t len = hq::block_len(k, n, b);
    long double a = 0;
    for (int64_t i = 0; i < len; ++i) a = std::max<long double>(a, std::fabs(static_cast<long double>(x[k * b + i])));
    ASSERT_TRUE(std::isfinite(s) && s >= 0) << "block " << k;
    ASSERT_LE(static_cast<long double>(s), a / Q * (1 + std::ldexp(1.0L, -22)) + std::ldexp(1.0L, -149)) << "block " << k;
    for (int64_t i = 0; i < len; ++i) {
      const int64_t g = k * b + i;
      const long double err = std::fabs(static_cast<long double>(x[g]) - static_cast<long double>(y[g]));
      ASSERT_LE(err, bound(s, bits)) << "n=" << n << " b=" << b << " bits=" << bits << " i=" << g << " x=" << x[g]
                                     << " deq=" << y[g] << " s=" << s;
      ASSERT_TRUE(std::isfinite(y[g]));
    }
    const unsigned char* p = q.data() + hq::record_offset(k, b, bits) + 4;
    for (int64_t i = 0; i < hq::payload_bytes(len, bits); ++i) {
      if (bits == 8) ASSERT_NE(p[i], 0x80);
      else ASSERT_TRUE((p[i] & 0xf) != 8 && (p[i] >> 4) != 8);
    }
    if (bits == 4 && (len & 1)) {
      ASSERT_EQ(p[len / 2] >> 4, 0) << "odd count: the last high nibble is padding";
    }
  }
}

const int64_t kBlocks[] = {8, 32, 64, 512, 4096};

}  // namespace

TEST(QuantFormat, Sizes) {
  EXPECT_EQ(hq::quantized_bytes(0, 64, 8), 0);
  EXPECT_EQ(hq::quantized_bytes(1, 64, 8), 5);
  EXPECT_EQ(hq::quantized_bytes(1, 64, 4), 5);
  EXPECT_EQ(hq::quantized_bytes(64, 64, 8), 68);
  EXPECT_EQ(hq::quantized_bytes(65, 64, 8), 68 + 5);
  EXPECT_EQ(hq::quantized_bytes(65, 64, 4), 36 + 5);
  EXPECT_EQ(hq::quantized_bytes(130, 64, 4), 2 * 36 + 5);
  EXPECT_EQ(hq::quantized_bytes(131, 64, 4), 2 * 36 + 6);
  EXPECT_EQ(hq::record_offset(3, 64, 4), 3 * 36);
  EXPECT_TRUE(hq::valid_block(hq::kDefaultBlock));
  EXPECT_FALSE(hq::valid_block(12));
  EXPECT_FALSE(hq::valid_block(0));
}

// Byte for byte: little-endian float32 scale, then two's complement int8 values.
TEST(QuantFormat, Int8Bytes) {
  const std::vector<float> x = {127, -127, 1, -1, 0, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f};
  const Bytes q = quantize(x, 64, 8);
  const Bytes want = {0x00, 0x00, 0x80, 0x3f,  // 1.0f
                      0x7f, 0x81, 0x01, 0xff, 0x00,
                      0x00, 0x02, 0x02, 0x00, 0xfe};  // ties to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2
  EXPECT_EQ(q, want);
}

// Nibble order: value 2j in the low nibble of byte j, 2j+1 in the high one; odd count padded.
TEST(QuantFormat, Int4NibbleOrder) {
  const std::vector<float> x = {1, -1, 7, -7, 3};
  const Bytes q = quantize(x, 64, 4);
  const Bytes want = {0x00, 0x00, 0x80, 0x3f, 0xf1, 0x97, 0x03};
  EXPECT_EQ(q, want);
  const std::vector<float> y = dequantize<float>(q, 5, 64, 4);
  EXPECT_EQ(y, x);
}

TEST(Quant, RandomBoundFloat) {
  std::mt19937_64 rng(13);
  for (int bits : {8, 4})
    for (int64_t b : kBlocks)
      for (int64_t n : counts_for(b)) check_roundtrip(random_values<float>(n, rng), b, bits);
  check_roundtrip(random_values<float>(1 << 20, rng), hq::kDefaultBlock, 8);
}

TEST(Quant, RandomBoundDouble) {
  std::mt19937_64 rng(14);
  for (int bits : {8, 4})
    for (int64_t b : kBlocks)
      for (int64_t n : counts_for(b)) check_roundtrip(random_values<double>(n, rng), b, bits);
}

TEST(Quant, Zeros) {
  for (int bits : {8, 4}) {
    std::vector<float> x(100, 0.0f);
    for (size_t i = 0; i < x.size(); i += 3) x[i] = -0.0f;
    const Bytes q = quantize(x, 32, bits);
    for (int64_t k = 0; k < 4; ++k) {
      uint32_t sb;
      std::memcpy(&sb, q.data() + hq::record_offset(k, 32, bits), 4);
      EXPECT_EQ(sb, 0u) << "scale of an all-zero block is +0";
    }
    const std::vector<float> y = dequantize<float>(q, 100, 32, bits);
    for (float v : y) EXPECT_EQ(v, 0.0f);
    std::vector<float> acc(100, 2.5f);
    hq::dequantize_add(q.data(), 100, 32, bits, acc.data());
    for (float v : acc) EXPECT_EQ(v, 2.5f);
  }
}

TEST(Quant, Denormals) {
  const float tmin = std::numeric_limits<float>::denorm_min();
  for (int bits : {8, 4}) {
    check_roundtrip(std::vector<float>{tmin, -tmin, 0, tmin}, 8, bits);
    check_roundtrip(std::vector<float>{1e-40f, -3e-39f, 7e-45f, 0, 1.17e-38f}, 8, bits);
    check_roundtrip(std::vector<float>{1e-40f, 1.0f, -1e-44f}, 8, bits);  // denormals beside a normal absmax
    check_roundtrip(std::vector<double>{1e-300, -2e-310, 4.9e-324, 0}, 8, bits);
    // A block of the smallest denormal is exact: s = denorm_min, q = 1.
    const std::vector<float> x(8, tmin);
    EXPECT_EQ(dequantize<float>(quantize(x, 8, bits), 8, 8, bits), x);
  }
}

TEST(Quant, Huge) {
  const float fmax = FLT_MAX;
  for (int bits : {8, 4}) {
    check_roundtrip(std::vector<float>{fmax, -fmax, 1.0f, fmax / 3}, 8, bits);
    check_roundtrip(std::vector<float>{-fmax}, 8, bits);
    check_roundtrip(std::vector<float>{3e38f, -2.9e38f, 1e30f}, 8, bits);
    check_roundtrip(std::vector<double>{1e38, -2e39, 1.0}, 8, bits);  // absmax > FLT_MAX, scale still fits float32
    // Beyond float32 scales: the block is flagged, not turned into a number.
    int64_t bad = -1;
    const std::vector<double> big = {1e300, 1.0, 2.0};
    const Bytes q = quantize(big, 8, bits, &bad);
    EXPECT_EQ(bad, 1);
    for (double v : dequantize<double>(q, 3, 8, bits)) EXPECT_TRUE(std::isnan(v));
  }
}

// A block of one value c: every q is Q, so deq = Q*s: c up to the rounding of s.
TEST(Quant, ConstantBlock) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1000, 1000);
  for (int bits : {8, 4})
    for (int t = 0; t < 200; ++t) {
      const float c = u(rng);
      const std::vector<float> x(33, c);
      for (float v : dequantize<float>(quantize(x, 32, bits), 33, 32, bits))
        ASSERT_LE(std::fabs(v - c), std::fabs(c) * std::ldexp(1.0f, -22)) << c;
    }
  // Where c / Q is exact, so is the round trip.
  EXPECT_EQ(dequantize<float>(quantize(std::vector<float>(8, 127 * 0.375f), 8, 8), 8, 8, 8),
            std::vector<float>(8, 127 * 0.375f));
  EXPECT_EQ(dequantize<double>(quantize(std::vector<double>(8, -7 * 1.25), 8, 4), 8, 8, 4),
            std::vector<double>(8, -7 * 1.25));
}

// The kernels round without clamping to [-Q, Q] (quant/kernels.hpp: the scale makes |x/s| <= Q
// up to roundings): blocks whose largest value sits at every exponent, from subnormal to near
// FLT_MAX, beside values one ulp below it and its negation, must never produce Q + 1 (it would
// wrap to the -128 / -8 that check_roundtrip refuses) and stay within the bound.
TEST(Quant, NoValuePastQ) {
  std::mt19937_64 rng(21);
  std::uniform_int_distribution<uint32_t> bits_of(1, 0x7f7fffffu);  // every positive finite float
  for (int bits : {8, 4})
    for (int t = 0; t < 4000; ++t) {
      uint32_t u = bits_of(rng);
      float a;
      std::memcpy(&a, &u, 4);
      const float below = std::nextafter(a, 0.0f);
      check_roundtrip(std::vector<float>{below, a, -a, -below, a * 0.5f}, 8, bits);
      check_roundtrip(std::vector<double>{double(below), -double(a), double(a)}, 8, bits);
    }
}

// A NaN or Inf never becomes a number: its block gets a NaN scale and a zero payload, is
// counted, and dequantizes (and dequantize-adds) to NaN; the other blocks are untouched.
TEST(Quant, NonFinite) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN()};
  for (int bits : {8, 4})
    for (float sp : specials) {
      const Bytes q = quantize_with_special<float>(40, sp, bits);  // block 1 of 8-value blocks
      for (int64_t i = 0; i < hq::payload_bytes(8, bits); ++i) EXPECT_EQ(q[hq::record_offset(1, 8, bits) + 4 + i], 0);
      const std::vector<float> y = dequantize<float>(q, 40, 8, bits);
      std::vector<float> acc(40, 1.0f);
      hq::dequantize_add(q.data(), 40, 8, bits, acc.data());
      for (int i = 0; i < 40; ++i) {
        EXPECT_EQ(std::isnan(y[i]), i >= 8 && i < 16) << i;
        EXPECT_EQ(std::isnan(acc[i]), i >= 8 && i < 16) << i;
      }
    }
  std::vector<double> d = {1.0, std::numeric_limits<double>::infinity()};
  int64_t bad = -1;
  quantize(d, 8, 8, &bad);
  EXPECT_EQ(bad, 1);
}

// Bit-identical output for the same input: twice, and from a copy at another alignment.
TEST(Quant, Deterministic) {
  std::mt19937_64 rng(99);
  for (int bits : {8, 4}) {
    const std::vector<float> x = random_values<float>(100003, rng);
    const Bytes a = quantize(x, 256, bits), b = quantize(x, 256, bits);
    EXPECT_EQ(a, b);
    std::vector<float> shifted(x.size() + 1);
    std::memcpy(shifted.data() + 1, x.data(), x.size() * sizeof(float));
    Bytes c(a.size());
    hq::quantize(shifted.data() + 1, static_cast<int64_t>(x.size()), 256, bits, c.data());
    EXPECT_EQ(a, c);
    const std::vector<float> y1 = dequantize<float>(a, 100003, 256, bits), y2 = dequantize<float>(a, 100003, 256, bits);
    EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)));
  }
}

// P contributions dequantized and summed in a fixed order, accumulating in T:
//  - bit-identical to dequantize into a temporary, then a plain sum (fused == unfused);
//  - |acc - sum of the dequantized values (long double)| <= (P-1) * u * sum |deq_p|;
//  - |acc - sum of the inputs| <= sum_p s_p * (1/2 + Q*2^-21) + (P-1) * u * sum |deq_p|.
template <class T>
void check_sum(int P, int64_t n, int64_t b, int bits, std::mt19937_64& rng) {
  const long double u = std::numeric_limits<T>::epsilon() / 2;
  std::vector<std::vector<T>> x(P), y(P);
  std::vector<Bytes> q(P);
  std::vector<T> acc(n, T(0)), plain(n, T(0));
  for (int p = 0; p < P; ++p) {
    x[p] = random_values<T>(n, rng);
    q[p] = quantize(x[p], b, bits);
    hq::dequantize_add(q[p].data(), n, b, bits, acc.data());
    y[p] = dequantize<T>(q[p], n, b, bits);
    for (int64_t i = 0; i < n; ++i) plain[i] = plain[i] + y[p][i];
  }
  ASSERT_EQ(0, std::memcmp(acc.data(), plain.data(), n * sizeof(T))) << "fused != dequantize then add";
  for (int64_t i = 0; i < n; ++i) {
    long double sx = 0, sdeq = 0, sabs = 0, e = 0;
    for (int p = 0; p < P; ++p) {
      sx += x[p][i];
      sdeq += y[p][i];
      sabs += std::fabs(static_cast<long double>(y[p][i]));
      e += bound(scale_of(q[p], i / b, b, bits), bits);
    }
    const long double rnd = (P - 1) * u * sabs;
    ASSERT_LE(std::fabs(acc[i] - sdeq), rnd) << "P=" << P << " i=" << i;
    ASSERT_LE(std::fabs(acc[i] - sx), e + rnd) << "P=" << P << " i=" << i;
  }
}

TEST(Quant, DequantizeReduce) {
  std::mt19937_64 rng(7);
  for (int bits : {8, 4})
    for (int P : {1, 2, 5, 16})
      for (int64_t n : {int64_t{1}, int64_t{63}, int64_t{1000}, int64_t{4099}}) {
        check_sum<float>(P, n, 64, bits, rng);
        check_sum<double>(P, n, 512, bits, rng);
      }
}

// HIER_QUANT_BLOCK (src/config/registry.cpp): its default is the kernels' default block; every
// allowed value is a valid block of the format; anything else is one line naming the variable,
// the value and what is allowed. The model restates the record size (model/cost_quant.hpp): it
// must agree with the format's.
namespace {
hier::config::ParseResult parse_block(const char* v) {
  return hier::config::parse([&](const char* name) -> std::optional<std::string> {
    if (std::string(name) == "HIER_QUANT_BLOCK") return std::string(v);
    return std::nullopt;
  }, {});
}
}  // namespace

TEST(QuantBlock, ConfigDefaultAllowedAndRefused) {
  EXPECT_EQ(hier::config::Config{}.quant_block, hq::kDefaultBlock);
  for (int64_t b = 32; b <= 4096; b *= 2) {
    const auto r = parse_block(std::to_string(b).c_str());
    EXPECT_TRUE(r.errors.empty()) << b;
    EXPECT_EQ(r.config.quant_block, b);
    EXPECT_TRUE(hq::valid_block(b)) << b;
  }
  for (const char* v : {"0", "16", "48", "100", "8192", "-512", "512k", "", "big"}) {
    const auto r = parse_block(v);
    ASSERT_EQ(r.errors.size(), 1u) << v;
    const std::string& e = r.errors[0];
    EXPECT_NE(e.find("HIER_QUANT_BLOCK"), std::string::npos) << e;
    EXPECT_NE(e.find(std::string("'") + v + "'"), std::string::npos) << e;
    EXPECT_NE(e.find("power of two from 32 to 4096"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_EQ(r.config.quant_block, hq::kDefaultBlock) << v;
  }
  for (int bits : {8, 4})
    for (int64_t b : {32, 512, 4096})
      for (int64_t n : {int64_t{1}, b - 1, b, b + 1, 3 * b + 7, int64_t{100003}})
        EXPECT_EQ(hier::model::quant_record_bytes(n, b, bits), hq::quantized_bytes(n, b, bits)) << n << " " << b << " " << bits;
}
