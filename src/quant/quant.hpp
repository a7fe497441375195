// Host drivers of the blockwise quantization kernels (quant/kernels.hpp; buffer format in
// quant/format.hpp). Preconditions: valid_block(block), valid_bits(bits), n >= 0, buffers not
// overlapping. `out` of quantize holds quantized_bytes(n, block, bits) bytes.
#pragma once

#include <cstdint>

#include "quant/format.hpp"

namespace hier::quant {

// Returns the number of blocks that could not be quantized (a NaN or Inf in them, or for double
// a scale beyond float32): they dequantize to NaN, so a caller that must keep IEEE semantics
// sends the buffer exactly when this is not 0.
int64_t quantize(const float* x, int64_t n, int64_t block, int bits, void* out);
int64_t quantize(const double* x, int64_t n, int64_t block, int bits, void* out);

// out[i] = dequantized value i.
void dequantize(const void* in, int64_t n, int64_t block, int bits, float* out);
void dequantize(const void* in, int64_t n, int64_t block, int bits, double* out);

// acc[i] += dequantized value i (one rounding for the product, one for the sum, in the type of acc).
void dequantize_add(const void* in, int64_t n, int64_t block, int bits, float* acc);
void dequantize_add(const void* in, int64_t n, int64_t block, int bits, double* acc);

}  // namespace hier::quant
