// Blockwise symmetric quantization kernels (issue 13), one block per call, written once as
// HIER_HD bodies: the host driver (quant/host.cpp) loops over blocks, a GPU backend maps one
// block to one thread block; quant/cuda_check.cu compiles these very bodies with nvcc.
// The buffer format is in quant/format.hpp.
//
// Determinism: every rank must dequantize to bit-identical values, on the host or a GPU. So
// every floating operation is one IEEE operation rounded to nearest, spelled through the
// helpers below: on a GPU __fmul_rn / __fadd_rn keep nvcc from contracting a multiply and an
// add into an FMA (which rounds once instead of twice), and the host build must not use
// -ffast-math or -ffp-contract=fast for these files (the default -std=c++20 gives contract=off).
//
// Rounding: q = x * (1/s) rounded to nearest, ties to even, by adding and
// subtracting 1.5 * 2^23 (2^52 for double): exact for |v| <= Q, branch-free, and vectorized by
// GCC on baseline x86-64 (SSE2 has no round instruction; rintf would be a call per value).
//
// Error (tested in tests/quant): with s the stored scale, Q = 127 or 7,
//   |x - deq(q(x))| <= s * (1/2 + Q * 2^-21)   per value, for every finite block;
// the Q*2^-21 term covers the float roundings of 1/s, of x*(1/s), of s itself (a value a few
// ulps past Q, which still rounds to Q) and of q*s. And s <= absmax/Q * (1 + 2^-22) + 2^-149.
#pragma once

#include <cstdint>
#include <cstring>

#include "device/hd.hpp"
#include "quant/format.hpp"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "quant/format.hpp stores little-endian float32 scales through memcpy: add byte swaps here"
#endif

namespace hier::quant {

// ---- one IEEE operation each, never fused (see above) ------------------------------------
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
HIER_HD inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
HIER_HD inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
HIER_HD inline float div_rn(float a, float b) { return __fdiv_rn(a, b); }
HIER_HD inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
HIER_HD inline double add_rn(double a, double b) { return __dadd_rn(a, b); }
HIER_HD inline double div_rn(double a, double b) { return __ddiv_rn(a, b); }
#else
HIER_HD inline float mul_rn(float a, float b) { return a * b; }
HIER_HD inline float add_rn(float a, float b) { return a + b; }
HIER_HD inline float div_rn(float a, float b) { return a / b; }
HIER_HD inline double mul_rn(double a, double b) { return a * b; }
HIER_HD inline double add_rn(double a, double b) { return a + b; }
HIER_HD inline double div_rn(double a, double b) { return a / b; }
#endif

// Per input type: the integer of its bits, the all-ones exponent (absmax bits at or above it:
// Inf or NaN) and the rounding constant.
template <class T> struct FloatBits;
template <> struct FloatBits<float> {
  using U = int32_t;  // signed: |x| bits fit, and a signed max vectorizes on SSE2
  static constexpr U kAbsMask = 0x7fffffff, kExpAll = 0x7f800000;
  static constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
};
template <> struct FloatBits<double> {
  using U = int64_t;
  static constexpr U kAbsMask = 0x7fffffffffffffffLL, kExpAll = 0x7ff0000000000000LL;
  static constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52
};

HIER_HD inline float bits_to_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
HIER_HD inline uint32_t float_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
// Neighbours of a finite s >= 0 (bits order = value order for non-negative floats).
HIER_HD inline float next_up(float s) { return bits_to_float(float_to_bits(s) + 1); }
HIER_HD inline float next_down(float s) { return bits_to_float(float_to_bits(s) - 1); }

inline constexpr float kFltMax = 0x1.fffffep+127f;
inline constexpr uint32_t kScaleNaN = 0x7fc00000u;  // the scale of a block sent exactly

HIER_HD inline float load_scale(const unsigned char* rec) { float s; memcpy(&s, rec, 4); return s; }
HIER_HD inline void store_scale(unsigned char* rec, float s) { memcpy(rec, &s, 4); }

// |x| as bits, maxed over the block: integer order is float order for non-negative values, and
// NaN and Inf sort above every finite value, so one integer max (vectorized, exact, no NaN
// rules to respect) gives both absmax and "is there a non-finite value".
template <class T>
HIER_HD inline typename FloatBits<T>::U absmax_bits(const T* __restrict__ x, int64_t n) {
  using U = typename FloatBits<T>::U;
  U m = 0;
  for (int64_t i = 0; i < n; ++i) {
    U b;
    memcpy(&b, &x[i], sizeof(T));
    b &= FloatBits<T>::kAbsMask;
    m = b > m ? b : m;
  }
  return m;
}

// The scale of a block of finite absmax a > 0, or NaN if float32 cannot hold it. Rounded to
// nearest, then moved one ulp up if Q*s < a (so that no value lands far past Q: this matters
// when s is subnormal, or 0 when a/Q underflows) and one ulp down if Q*s overflows (a near
// FLT_MAX: q*s must stay finite).
template <int Q>
HIER_HD inline float block_scale(float a) {
  float s = div_rn(a, static_cast<float>(Q));
  if (mul_rn(s, static_cast<float>(Q)) < a) s = next_up(s);
  if (!(mul_rn(s, static_cast<float>(Q)) <= kFltMax)) s = next_down(s);
  return s;
}
template <int Q>
HIER_HD inline float block_scale(double a) {
  const double sd = div_rn(a, static_cast<double>(Q));
  if (!(sd <= static_cast<double>(kFltMax))) return bits_to_float(kScaleNaN);
  float s = static_cast<float>(sd);  // round to nearest
  if (static_cast<double>(s) * Q < a) s = next_up(s);  // the product is exact in double
  return s <= kFltMax ? s : bits_to_float(kScaleNaN);
}

// v rounded to nearest integer (ties to even). No clamp to [-Q, Q] is needed: |v| <= Q * (1 + 2^-22)
// by the choice of s (block_scale: Q * s >= absmax, and one rounding of x * (1/s) or x / s), so
// |v| < Q + 1/2 for Q <= 127 and the rounded value is within [-Q, Q]; tests/quant checks it on
// the edge cases (subnormal and near-FLT_MAX scales, blocks of one value). The 1.5 * 2^k trick is
// exact far beyond that range. Dropping the clamp doubled quantize's speed on SSE2, which has
// no 32-bit integer min/max (a clamp there is compare + and/andnot/or per bound).
template <int Q, class T>
HIER_HD inline int32_t round_nearest(T v) {
  return static_cast<int32_t>(add_rn(add_rn(v, FloatBits<T>::kRound), -FloatBits<T>::kRound));
}

// x * inv, or x / s where 1/s would overflow (kDiv: float blocks with a subnormal scale).
template <bool kDiv, class T>
HIER_HD inline T scaled(T x, T inv, T s) { return kDiv ? div_rn(x, s) : mul_rn(x, inv); }

template <int kBits, bool kDiv, class T>
HIER_HD inline void quantize_values(const T* __restrict__ x, int64_t n, T inv, T s, unsigned char* __restrict__ p) {
  constexpr int Q = qmax(kBits);
  if constexpr (kBits == 8) {
    for (int64_t i = 0; i < n; ++i)
      p[i] = static_cast<unsigned char>(round_nearest<Q>(scaled<kDiv>(x[i], inv, s)));
  } else {
    const int64_t pairs = n / 2;
    for (int64_t j = 0; j < pairs; ++j) {
      const int32_t lo = round_nearest<Q>(scaled<kDiv>(x[2 * j], inv, s));
      const int32_t hi = round_nearest<Q>(scaled<kDiv>(x[2 * j + 1], inv, s));
      p[j] = static_cast<unsigned char>((lo & 0xf) | ((hi & 0xf) << 4));
    }
    if (n & 1) p[pairs] = static_cast<unsigned char>(round_nearest<Q>(scaled<kDiv>(x[n - 1], inv, s)) & 0xf);
  }
}

// Quantizes the n values at x (1 <= n <= B) into the record at rec (format.hpp). Returns 1 if
// the block could not be quantized (non-finite value, or a float64 scale beyond float32): its
// scale is then NaN and its payload zero; 0 otherwise.
template <int kBits, class T>
HIER_HD inline int quantize_block(const T* __restrict__ x, int64_t n, unsigned char* __restrict__ rec) {
  constexpr int Q = qmax(kBits);
  unsigned char* __restrict__ p = rec + 4;
  const auto m = absmax_bits(x, n);
  float s = 0.0f;
  if (m >= FloatBits<T>::kExpAll) {
    s = bits_to_float(kScaleNaN);
  } else if (m != 0) {
    T a;
    memcpy(&a, &m, sizeof(T));
    s = block_scale<Q>(a);
  }
  store_scale(rec, s);
  if (!(s > 0.0f)) {  // all zeros (s = 0: every q is 0, no division by 0), or NaN
    for (int64_t i = 0; i < payload_bytes(n, kBits); ++i) p[i] = 0;
    return s == 0.0f ? 0 : 1;
  }
  const T st = static_cast<T>(s);
  if (sizeof(T) == 4 && s < 0x1p-126f) quantize_values<kBits, true>(x, n, T(0), st, p);  // 1/s: inf
  else quantize_values<kBits, false>(x, n, div_rn(T(1), st), st, p);
  return 0;
}

// Sign-extends the low and high nibbles of a payload byte.
HIER_HD inline int32_t nib_lo(unsigned char b) { return static_cast<int8_t>(static_cast<unsigned char>(b << 4)) >> 4; }
HIER_HD inline int32_t nib_hi(unsigned char b) { return static_cast<int8_t>(b) >> 4; }

// out[i] = q_i * s (kAdd false) or out[i] += q_i * s (kAdd true: the fused dequantize-reduce,
// accumulating in T), for the n values of the record at rec. A NaN scale makes every value NaN.
template <int kBits, bool kAdd, class T>
HIER_HD inline void dequantize_block(const unsigned char* __restrict__ rec, int64_t n, T* __restrict__ out) {
  const T s = static_cast<T>(load_scale(rec));
  const unsigned char* __restrict__ p = rec + 4;
  if constexpr (kBits == 8) {
    for (int64_t i = 0; i < n; ++i) {
      const T v = mul_rn(static_cast<T>(static_cast<int8_t>(p[i])), s);
      out[i] = kAdd ? add_rn(out[i], v) : v;
    }
  } else {
    const int64_t pairs = n / 2;
    for (int64_t j = 0; j < pairs; ++j) {
      const T lo = mul_rn(static_cast<T>(nib_lo(p[j])), s);
      const T hi = mul_rn(static_cast<T>(nib_hi(p[j])), s);
      out[2 * j] = kAdd ? add_rn(out[2 * j], lo) : lo;
      out[2 * j + 1] = kAdd ? add_rn(out[2 * j + 1], hi) : hi;
    }
    if (n & 1) {
      const T v = mul_rn(static_cast<T>(nib_lo(p[pairs])), s);
      out[n - 1] = kAdd ? add_rn(out[n - 1], v) : v;
    }
  }
}

}  // namespace hier::quant
