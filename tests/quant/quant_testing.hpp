// Shared by the kernel tests (quant_test.cpp, quant_f16_test.cpp): quantize into a guarded
// buffer (nothing written past its end; the count of blocks that could not be quantized checked
// or returned), dequantize, read a block's scale, random values of varying magnitude, and the
// value counts to try at a block size.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "quant/format.hpp"
#include "quant/quant.hpp"

namespace hq = hier::quant;

namespace {

using Bytes = std::vector<unsigned char>;

template <class T>
Bytes quantize(const std::vector<T>& x, int64_t b, int bits, int64_t* bad = nullptr) {
  Bytes q(hq::quantized_bytes(static_cast<int64_t>(x.size()), b, bits) + 16, 0xAB);  // guard
  const int64_t nbad = hq::quantize(x.data(), static_cast<int64_t>(x.size()), b, bits, q.data());
  if (bad) *bad = nbad;
  else EXPECT_EQ(nbad, 0);
  for (size_t i = q.size() - 16; i < q.size(); ++i) EXPECT_EQ(q[i], 0xAB) << "wrote past the end";
  q.resize(q.size() - 16);
  return q;
}

// The dequantized values; every one is written (the sentinel would fail any bound).
template <class T>
std::vector<T> dequantize(const Bytes& q, int64_t n, int64_t b, int bits) {
  std::vector<T> y(n, T(-12345));
  hq::dequantize(q.data(), n, b, bits, y.data());
  return y;
}

inline float scale_of(const Bytes& q, int64_t k, int64_t b, int bits) {
  float s;
  std::memcpy(&s, q.data() + hq::record_offset(k, b, bits), 4);
  return s;
}

// What random_values draws: normal(0, 1) values times 2^e, e uniform in [emin, emax] and redrawn
// every 37 values (so the blocks differ in magnitude), magnitudes past `maxabs` clamped to it,
// and with `zeros` every 101st value (from the 6th) an exact zero.
struct Spread {
  int emin = -30, emax = 30;
  double maxabs = std::numeric_limits<double>::infinity();
  bool zeros = false;
};

// A vector of `n` values 0.25 x (i - 20) whose value 11 (block 1 of 8-value blocks) is `special`
// (NaN or an infinity), quantized in 8-value blocks: the kernel must report block 1 and write
// its record's scale as the canonical NaN (0x7fc00000). Returns the records.
template <class T>
Bytes quantize_with_special(int64_t n, T special, int bits) {
  std::vector<T> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<T>(0.25f * static_cast<float>(i - 20));
  x[11] = special;
  int64_t bad = -1;
  Bytes q = quantize(x, 8, bits, &bad);
  EXPECT_EQ(bad, 1);
  uint32_t sb;
  std::memcpy(&sb, q.data() + hq::record_offset(1, 8, bits), 4);
  EXPECT_EQ(sb, 0x7fc00000u);
  return q;
}

template <class T>
std::vector<T> random_values(int64_t n, std::mt19937_64& rng, const Spread& sp = {}) {
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_int_distribution<int> e(sp.emin, sp.emax);
  std::vector<T> x(n);
  double mag = 1;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 37 == 0) mag = std::ldexp(1.0, e(rng));
    const double v = g(rng) * mag;
    x[i] = static_cast<T>(std::fabs(v) > sp.maxabs ? std::copysign(sp.maxabs, v) : v);
    if (sp.zeros && i % 101 == 5) x[i] = T(0);
  }
  return x;
}

// Counts to try at block size b: none, a few (odd ones for int4's padding), one short of, at and
// one past one, two and three blocks, and many blocks.
inline std::vector<int64_t> counts_for(int64_t b) {
  return {0, 1, 2, 3, 7, 13, 31, 97, b - 1, b, b + 1, 2 * b - 1, 2 * b + 1, 3 * b, 10007};
}

}  // namespace
