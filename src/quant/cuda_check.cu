// Compile check only (never run, never linked into libhier.so): the quantization kernels'
// HIER_HD bodies (quant/kernels.hpp) built as CUDA device code, one __global__ kernel per
// entry point and type (float, double, and 16-bit floats as CUDA's __half), one block of the
// format per thread block. A real GPU backend would split each block's loops over the threads;
// this only proves the bodies are device code. The same file is compiled by hipcc as HIP for
// gfx90a, the MI250X (target hier_quant_hip_check, src/quant/CMakeLists.txt), 16-bit floats as
// HIP's __half (quant/f16.hpp).
#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#endif

#include "quant/kernels.hpp"

namespace hier::quant {

template <int kBits, class T>
__global__ void quantize_kernel(const T* x, int64_t n, int64_t b, unsigned char* out, int* bad) {
  const int64_t k = blockIdx.x;
  if (k >= num_blocks(n, b) || threadIdx.x != 0) return;
  if (quantize_block<kBits>(x + k * b, block_len(k, n, b), out + record_offset(k, b, kBits))) atomicAdd(bad, 1);
}

template <int kBits, bool kAdd, class T>
__global__ void dequantize_kernel(const unsigned char* in, int64_t n, int64_t b, T* out) {
  const int64_t k = blockIdx.x;
  if (k >= num_blocks(n, b) || threadIdx.x != 0) return;
  dequantize_block<kBits, kAdd>(in + record_offset(k, b, kBits), block_len(k, n, b), out + k * b);
}

// The fused dequantize-reduce of 16-bit values (__half here: quant/f16.hpp), summed in float.
template <int kBits, class T>
__global__ void dequantize_sum_kernel(const unsigned char* in, int64_t part_bytes, int parts, int64_t n, int64_t b, T* out) {
  const int64_t k = blockIdx.x;
  if (k >= num_blocks(n, b) || threadIdx.x != 0) return;
  dequantize_sum_block<kBits>(in + record_offset(k, b, kBits), part_bytes, parts, block_len(k, n, b), out + k * b);
}

// Every entry point the host driver has: {int8, int4} x {float, double} x {quantize,
// dequantize, dequantize-add}.
template __global__ void quantize_kernel<8, float>(const float*, int64_t, int64_t, unsigned char*, int*);
template __global__ void quantize_kernel<4, float>(const float*, int64_t, int64_t, unsigned char*, int*);
template __global__ void quantize_kernel<8, double>(const double*, int64_t, int64_t, unsigned char*, int*);
template __global__ void quantize_kernel<4, double>(const double*, int64_t, int64_t, unsigned char*, int*);
template __global__ void dequantize_kernel<8, false, float>(const unsigned char*, int64_t, int64_t, float*);
template __global__ void dequantize_kernel<4, false, float>(const unsigned char*, int64_t, int64_t, float*);
template __global__ void dequantize_kernel<8, false, double>(const unsigned char*, int64_t, int64_t, double*);
template __global__ void dequantize_kernel<4, false, double>(const unsigned char*, int64_t, int64_t, double*);
template __global__ void dequantize_kernel<8, true, float>(const unsigned char*, int64_t, int64_t, float*);
template __global__ void dequantize_kernel<4, true, float>(const unsigned char*, int64_t, int64_t, float*);
template __global__ void dequantize_kernel<8, true, double>(const unsigned char*, int64_t, int64_t, double*);
template __global__ void dequantize_kernel<4, true, double>(const unsigned char*, int64_t, int64_t, double*);
#if HIER_QUANT_F16
// 16-bit floats: quantize, dequantize, and the sum in float (no dequantize-add in 16 bits).
template __global__ void quantize_kernel<8, f16>(const f16*, int64_t, int64_t, unsigned char*, int*);
template __global__ void quantize_kernel<4, f16>(const f16*, int64_t, int64_t, unsigned char*, int*);
template __global__ void dequantize_kernel<8, false, f16>(const unsigned char*, int64_t, int64_t, f16*);
template __global__ void dequantize_kernel<4, false, f16>(const unsigned char*, int64_t, int64_t, f16*);
template __global__ void dequantize_sum_kernel<8, f16>(const unsigned char*, int64_t, int, int64_t, int64_t, f16*);
template __global__ void dequantize_sum_kernel<4, f16>(const unsigned char*, int64_t, int, int64_t, int64_t, f16*);
#endif

}  // namespace hier::quant
