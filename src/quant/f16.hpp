// The 16-bit float (IEEE 754 binary16) of the quantization kernels, where the compiler has one
// (issue 13: "16-bit floats where the MPI has a type for them"; MPICH's MPIX_C_FLOAT16 is C's
// _Float16). HIER_QUANT_F16 is 1 where hier::quant::f16 exists:
//   - host (GCC >= 12 on x86-64, clang): _Float16, the type MPIX_C_FLOAT16 describes;
//   - CUDA (nvcc): __half from cuda_fp16.h, the same 2 bytes (quant/cuda_check.cu);
//   - HIP (hipcc): __half from hip_fp16.h, whose conversions are host and device functions
//     (the GPU module, gpu/module.cu, compiled for gfx90a);
//   - elsewhere (a compiler without _Float16) HIER_QUANT_F16 is 0 and 16-bit floats stay exact.
// The kernels never compute in 16 bits: a value is widened to float (exact), every operation is
// the float one, and a result is narrowed back to 16 bits (round to nearest even) once. widen
// and narrow16 are these two conversions.
#pragma once

#include "device/hd.hpp"

#if defined(__CUDACC__) || defined(__HIPCC__)
// CUDA's and HIP's __half: the same 2 bytes, the same host-and-device conversions.
#if defined(__HIPCC__)
#include <hip/hip_fp16.h>
#else
#include <cuda_fp16.h>
#endif
#define HIER_QUANT_F16 1
namespace hier::quant {
using f16 = __half;
HIER_HD inline float widen(f16 x) { return __half2float(x); }
HIER_HD inline f16 narrow16(float x) { return __float2half_rn(x); }
}  // namespace hier::quant
#elif defined(__FLT16_MAX__)
#include <cstdint>
#include <cstring>
#define HIER_QUANT_F16 1
namespace hier::quant {
using f16 = _Float16;
// The conversions by bits, not by GCC's: without -mf16c (not in baseline x86-64) a _Float16
// conversion is a library call per value (__extendhfsf2 / __truncsfhf2) and no loop around it
// vectorizes. These are branch-free selects on integers and floats that GCC vectorizes, give the
// same values as GCC's conversions (tests/quant/quant_f16_test.cpp: every f16, and floats
// across the whole range) and never compute on a float subnormal (so a program that sets
// flush-to-zero / denormals-are-zero gets the same result).
HIER_HD inline float widen(f16 x) {
  uint16_t h;
  memcpy(&h, &x, 2);
  const uint32_t em = h & 0x7fffu, sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const float sub = static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f;  // f16 subnormal or 0: exact
  uint32_t subb;
  memcpy(&subb, &sub, 4);
  // Selects as masks (a ?: chain stays a branch and the loop scalar).
  const uint32_t is_sub = 0u - static_cast<uint32_t>(em < 0x400u), is_top = 0u - static_cast<uint32_t>(em >= 0x7c00u);
  const uint32_t big = (((em << 13) | 0x7f800000u) & is_top) | (((em << 13) + 0x38000000u) & ~is_top);
  const uint32_t out = ((subb & is_sub) | (big & ~is_sub)) | sign;
  float f;
  memcpy(&f, &out, 4);
  return f;
}
// Round to nearest, ties to even; beyond 65504 (from 65520 on) Inf; NaN stays a quiet NaN.
HIER_HD inline f16 narrow16(float x) {
  uint32_t f;
  memcpy(&f, &x, 4);
  const uint32_t a = f & 0x7fffffffu, sign = (f >> 16) & 0x8000u;
  // Normal f16 (|x| >= 2^-14): rebias the exponent, round the 13 dropped bits to nearest even.
  const uint32_t norm = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Subnormal f16 (|x| < 2^-14): |x| * 2^24 < 1024 rounded to an integer, to nearest even (the
  // 1.5 * 2^23 trick of quant/kernels.hpp; a float subnormal gives 0, its correct rounding).
  float t;
  memcpy(&t, &a, 4);
  const uint32_t sub = static_cast<uint32_t>(static_cast<int32_t>((t * 0x1p24f + 12582912.0f) - 12582912.0f));
  const uint32_t is_nan = 0u - static_cast<uint32_t>(a > 0x7f800000u), is_inf = 0u - static_cast<uint32_t>(a >= 0x477ff000u),
                 is_norm = 0u - static_cast<uint32_t>(a >= 0x38800000u);
  const uint32_t fin = (norm & is_norm) | (sub & ~is_norm);
  const uint32_t big = ((0x7e00u | ((a >> 13) & 0x3ffu)) & is_nan) | (0x7c00u & ~is_nan);
  const uint32_t o = (big & is_inf) | (fin & ~is_inf);
  const uint16_t h = static_cast<uint16_t>(o | sign);
  f16 r;
  memcpy(&r, &h, 2);
  return r;
}
}  // namespace hier::quant
#else
#define HIER_QUANT_F16 0
#endif
