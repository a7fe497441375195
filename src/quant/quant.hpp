// Host drivers of the blockwise quantization kernels (quant/kernels.hpp; buffer format in
// quant/format.hpp). Preconditions: valid_block(block), valid_bits(bits), n >= 0, buffers not
// overlapping. `out` of quantize holds quantized_bytes(n, block, bits) bytes.
#pragma once

#include <cstdint>

#include "quant/f16.hpp"
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

#if HIER_QUANT_F16
// 16-bit floats (quant/f16.hpp; MPICH's MPIX_C_FLOAT16): quantized as the same values in float
// would be (the same records), dequantized in float and rounded to f16 once.
int64_t quantize(const f16* x, int64_t n, int64_t block, int bits, void* out);
void dequantize(const void* in, int64_t n, int64_t block, int bits, f16* out);
// out[i] = the sum of value i of the `parts` quantized buffers at in + k * part_bytes (k = 0, 1,
// ... in that order), accumulated in float and rounded to f16 once: the fused dequantize-reduce
// of 16-bit values (never summed in 16 bits). out must not overlap in.
void dequantize_sum(const void* in, int64_t part_bytes, int parts, int64_t n, int64_t block, int bits, f16* out);
#endif

}  // namespace hier::quant
