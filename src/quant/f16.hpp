// The 16-bit float (IEEE 754 binary16) of the quantization kernels, where the compiler has one
// (issue 13: "16-bit floats where the MPI has a type for them"; MPICH's MPIX_C_FLOAT16 is C's
// _Float16). HIER_QUANT_F16 is 1 where hier::quant::f16 exists:
//   - host (GCC >= 12 on x86-64, clang): _Float16, the type MPIX_C_FLOAT16 describes;
//   - CUDA (nvcc): __half from cuda_fp16.h, the same 2 bytes (quant/cuda_check.cu);
//   - elsewhere (a compiler without _Float16; HIP: not compile-checked here, no hipcc on the
//     build machines) HIER_QUANT_F16 is 0 and 16-bit floats stay exact.
// The kernels never compute in 16 bits: a value is widened to float (exact), every operation is
// the float one, and a result is narrowed back to 16 bits (round to nearest even) once.
#pragma once

#include "device/hd.hpp"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define HIER_QUANT_F16 1
namespace hier::quant {
using f16 = __half;
HIER_HD inline float widen(f16 x) { return __half2float(x); }
HIER_HD inline f16 narrow16(float x) { return __float2half_rn(x); }
}  // namespace hier::quant
#elif defined(__FLT16_MAX__) && !defined(__HIPCC__)
#define HIER_QUANT_F16 1
namespace hier::quant {
using f16 = _Float16;
HIER_HD inline float widen(f16 x) { return static_cast<float>(x); }
HIER_HD inline f16 narrow16(float x) { return static_cast<f16>(x); }
}  // namespace hier::quant
#else
#define HIER_QUANT_F16 0
#endif
