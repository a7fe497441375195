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
//
// 16-bit floats (quant/f16.hpp, where the compiler has them): every value is widened to float
// (exact) and quantized exactly as that float would be, so a block of f16 values gives the same
// record, byte for byte, as the same values as float32. Dequantizing computes q*s in float and
// rounds it to f16 once, which adds at most half an f16 ulp of the result:
//   |x - deq(q(x))| <= s * (1/2 + Q * 2^-21) + 2^-11 * absmax + 2^-25   per value
// (2^-11 * |v| bounds half an ulp of a normal f16 v, 2^-25 of a subnormal one). The fused
// dequantize-reduce of f16 never adds in f16: dequantize_sum_block sums the N parts in float, in
// part order, and rounds the sum to f16 once (one rounding, not N; every rank the same bits).
#pragma once

#include <cstdint>
#include <cstring>

#include "device/hd.hpp"
#include "quant/f16.hpp"
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
// Inf or NaN), the type C the kernels compute in, and (for C) the rounding constant.
template <class T> struct FloatBits;
template <> struct FloatBits<float> {
  using U = int32_t;  // signed: |x| bits fit, and a signed max vectorizes on SSE2
  using C = float;
  static constexpr U kAbsMask = 0x7fffffff, kExpAll = 0x7f800000;
  static constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
};
template <> struct FloatBits<double> {
  using U = int64_t;
  using C = double;
  static constexpr U kAbsMask = 0x7fffffffffffffffLL, kExpAll = 0x7ff0000000000000LL;
  static constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52
};
#if HIER_QUANT_F16
template <> struct FloatBits<f16> {
  using U = int16_t;  // a signed 16-bit max (SSE2 pmaxsw)
  using C = float;    // computed in float: every f16 is a float, exactly
  static constexpr U kAbsMask = 0x7fff, kExpAll = 0x7c00;
};
#endif

// A value in its compute type (exact), and a compute-type result stored as T (f16: rounded to
// nearest even, once; float and double: nothing to do).
HIER_HD inline float widen(float x) { return x; }
HIER_HD inline double widen(double x) { return x; }
template <class T>
HIER_HD inline T narrow_to(typename FloatBits<T>::C v) { return v; }
#if HIER_QUANT_F16
template <>
HIER_HD inline f16 narrow_to<f16>(float v) { return narrow16(v); }
#endif

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

template <int kBits, bool kDiv, class T, class C = typename FloatBits<T>::C>
HIER_HD inline void quantize_values(const T* __restrict__ x, int64_t n, C inv, C s, unsigned char* __restrict__ p) {
  constexpr int Q = qmax(kBits);
  if constexpr (kBits == 8) {
    for (int64_t i = 0; i < n; ++i)
      p[i] = static_cast<unsigned char>(round_nearest<Q>(scaled<kDiv>(widen(x[i]), inv, s)));
  } else {
    const int64_t pairs = n / 2;
    for (int64_t j = 0; j < pairs; ++j) {
      const int32_t lo = round_nearest<Q>(scaled<kDiv>(widen(x[2 * j]), inv, s));
      const int32_t hi = round_nearest<Q>(scaled<kDiv>(widen(x[2 * j + 1]), inv, s));
      p[j] = static_cast<unsigned char>((lo & 0xf) | ((hi & 0xf) << 4));
    }
    if (n & 1) p[pairs] = static_cast<unsigned char>(round_nearest<Q>(scaled<kDiv>(widen(x[n - 1]), inv, s)) & 0xf);
  }
}

// The scale of a block whose |x| bits maxed to m (absmax_bits): NaN where the block cannot be
// quantized, 0 for an all-zero block. Shared by quantize_block and the GPU module's cooperative
// kernel (gpu/module.cu), which finds m with a warp's shuffles.
template <int kBits, class T>
HIER_HD inline float scale_of(typename FloatBits<T>::U m) {
  if (m >= FloatBits<T>::kExpAll) return bits_to_float(kScaleNaN);
  if (m == 0) return 0.0f;
  T a;
  memcpy(&a, &m, sizeof(T));
  return block_scale<qmax(kBits)>(widen(a));  // f16: absmax <= 65504, s a normal float >= 2^-24 / Q
}
// Whether values of T at scale s > 0 are divided by s (1/s would overflow: a float block with a
// subnormal scale) rather than multiplied by 1/s.
template <class T>
HIER_HD inline bool divides(float s) { return sizeof(typename FloatBits<T>::C) == 4 && s < 0x1p-126f; }

// Quantizes the n values at x (1 <= n <= B) into the record at rec (format.hpp). Returns 1 if
// the block could not be quantized (non-finite value, or a float64 scale beyond float32): its
// scale is then NaN and its payload zero; 0 otherwise.
template <int kBits, class T>
HIER_HD inline int quantize_block(const T* __restrict__ x, int64_t n, unsigned char* __restrict__ rec) {
  using C = typename FloatBits<T>::C;
  unsigned char* __restrict__ p = rec + 4;
  const float s = scale_of<kBits, T>(absmax_bits(x, n));
  store_scale(rec, s);
  if (!(s > 0.0f)) {  // all zeros (s = 0: every q is 0, no division by 0), or NaN
    for (int64_t i = 0; i < payload_bytes(n, kBits); ++i) p[i] = 0;
    return s == 0.0f ? 0 : 1;
  }
  const C st = static_cast<C>(s);
  if (divides<T>(s)) quantize_values<kBits, true>(x, n, C(0), st, p);  // 1/s: inf
  else quantize_values<kBits, false>(x, n, div_rn(C(1), st), st, p);
  return 0;
}

// Sign-extends the low and high nibbles of a payload byte.
HIER_HD inline int32_t nib_lo(unsigned char b) { return static_cast<int8_t>(static_cast<unsigned char>(b << 4)) >> 4; }
HIER_HD inline int32_t nib_hi(unsigned char b) { return static_cast<int8_t>(b) >> 4; }

// out[i] = q_i * s (kAdd false) or out[i] += q_i * s (kAdd true: the fused dequantize-reduce,
// accumulating in T), for the n values of the payload p at scale s (p: a record's payload, or
// one inside it at an even value offset). A NaN scale makes every value NaN. f16 (16 bits):
// kAdd false only (q_i * s in float, rounded to f16 once); f16 sums go through
// dequantize_sum_block, which accumulates in float.
template <int kBits, bool kAdd, class T, class C = typename FloatBits<T>::C>
HIER_HD inline void dequantize_values(C s, const unsigned char* __restrict__ p, int64_t n, T* __restrict__ out) {
  static_assert(!kAdd || sizeof(T) >= 4, "16-bit values are never accumulated in 16 bits: dequantize_sum_block");
  if constexpr (kBits == 8) {
    for (int64_t i = 0; i < n; ++i) {
      const C v = mul_rn(static_cast<C>(static_cast<int8_t>(p[i])), s);
      out[i] = kAdd ? narrow_to<T>(add_rn(widen(out[i]), v)) : narrow_to<T>(v);
    }
  } else {
    const int64_t pairs = n / 2;
    for (int64_t j = 0; j < pairs; ++j) {
      const C lo = mul_rn(static_cast<C>(nib_lo(p[j])), s);
      const C hi = mul_rn(static_cast<C>(nib_hi(p[j])), s);
      out[2 * j] = kAdd ? narrow_to<T>(add_rn(widen(out[2 * j]), lo)) : narrow_to<T>(lo);
      out[2 * j + 1] = kAdd ? narrow_to<T>(add_rn(widen(out[2 * j + 1]), hi)) : narrow_to<T>(hi);
    }
    if (n & 1) {
      const C v = mul_rn(static_cast<C>(nib_lo(p[pairs])), s);
      out[n - 1] = kAdd ? narrow_to<T>(add_rn(widen(out[n - 1]), v)) : narrow_to<T>(v);
    }
  }
}

// The n values of the record at rec (format.hpp), dequantized into out (kAdd: added to out).
template <int kBits, bool kAdd, class T>
HIER_HD inline void dequantize_block(const unsigned char* __restrict__ rec, int64_t n, T* __restrict__ out) {
  dequantize_values<kBits, kAdd>(static_cast<typename FloatBits<T>::C>(load_scale(rec)), rec + 4, n, out);
}

// Error feedback of one block: r[i] = x[i] - (value i of the record at rec), and 0 where that
// difference is not finite (a block sent as NaN must not poison later calls). The same bits as
// dequantizing into r and subtracting in T, which the host executor does (exec/executor.cpp):
// x - v is spelled x + (-v), one IEEE operation in the compute type (negation is exact), rounded
// to T once (16-bit values: computed in float, as GCC computes _Float16 arithmetic).
template <int kBits, class T>
HIER_HD inline void feedback_block(const unsigned char* __restrict__ rec, const T* __restrict__ x, int64_t n,
                                   T* __restrict__ r) {
  using U = typename FloatBits<T>::U;
  dequantize_block<kBits, false>(rec, n, r);
  for (int64_t i = 0; i < n; ++i) {
    T d = narrow_to<T>(add_rn(widen(x[i]), -widen(r[i])));
    U b;
    memcpy(&b, &d, sizeof(T));
    if ((b & FloatBits<T>::kAbsMask) >= FloatBits<T>::kExpAll) memset(&d, 0, sizeof(T));  // +0
    r[i] = d;
  }
}

// The error feedback's x += r (before quantizing): x[i] = x[i] + r[i] in the compute type,
// rounded to T once; the host executor's `x[i] = x[i] + r[i]` bit for bit (16-bit values: GCC
// adds _Float16 in float and rounds once).
template <class T>
HIER_HD inline void add_values(const T* __restrict__ r, T* __restrict__ x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = narrow_to<T>(add_rn(widen(x[i]), widen(r[i])));
}

// The fused dequantize-reduce of one block into 16-bit values (or any T): out[i] = the sum over
// the `parts` records rec + k * stride (k = 0, 1, ... in that order) of q_i * s_k, summed in float
// from +0 (in chunks of kChunk values on the stack) and rounded to T once at the end. Every rank
// that sums the same records gets the same bits; the error of the sum beyond the quantization
// errors is the float additions' (parts - 1) * 2^-24 relative plus the one rounding to T.
template <int kBits, class T>
HIER_HD inline void dequantize_sum_block(const unsigned char* __restrict__ rec, int64_t stride, int parts, int64_t n,
                                         T* __restrict__ out) {
  constexpr int64_t kChunk = 64;  // even: int4 chunks start on a byte
  float acc[kChunk];
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t len = n - c < kChunk ? n - c : kChunk;
    for (int64_t i = 0; i < len; ++i) acc[i] = 0.0f;
    for (int k = 0; k < parts; ++k) {
      const unsigned char* r = rec + k * stride;
      dequantize_values<kBits, true>(load_scale(r), r + 4 + payload_bytes(c, kBits), len, acc);
    }
    for (int64_t i = 0; i < len; ++i) out[c + i] = narrow_to<T>(acc[i]);
  }
}

}  // namespace hier::quant
