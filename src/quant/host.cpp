// The host backend of the quantization kernels: a loop over blocks, each block one call of the
// HIER_HD body (inlined: its inner loops are what GCC vectorizes; see -fopt-info-vec).
#include "quant/quant.hpp"

#include "quant/kernels.hpp"

namespace hier::quant {
namespace {

template <int kBits, class T>
int64_t quantize_all(const T* x, int64_t n, int64_t b, unsigned char* out) {
  int64_t bad = 0;
  const int64_t nb = num_blocks(n, b);
  for (int64_t k = 0; k < nb; ++k)
    bad += quantize_block<kBits>(x + k * b, block_len(k, n, b), out + record_offset(k, b, kBits));
  return bad;
}

template <int kBits, bool kAdd, class T>
void dequantize_all(const unsigned char* in, int64_t n, int64_t b, T* out) {
  const int64_t nb = num_blocks(n, b);
  for (int64_t k = 0; k < nb; ++k)
    dequantize_block<kBits, kAdd>(in + record_offset(k, b, kBits), block_len(k, n, b), out + k * b);
}

template <class T>
int64_t quantize_t(const T* x, int64_t n, int64_t b, int bits, void* out) {
  auto* o = static_cast<unsigned char*>(out);
  return bits == 8 ? quantize_all<8>(x, n, b, o) : quantize_all<4>(x, n, b, o);
}

template <bool kAdd, class T>
void dequantize_t(const void* in, int64_t n, int64_t b, int bits, T* out) {
  const auto* i = static_cast<const unsigned char*>(in);
  if (bits == 8) dequantize_all<8, kAdd>(i, n, b, out);
  else dequantize_all<4, kAdd>(i, n, b, out);
}

#if HIER_QUANT_F16
template <int kBits>
void dequantize_sum_all(const unsigned char* in, int64_t part_bytes, int parts, int64_t n, int64_t b, f16* out) {
  const int64_t nb = num_blocks(n, b);
  for (int64_t k = 0; k < nb; ++k)
    dequantize_sum_block<kBits>(in + record_offset(k, b, kBits), part_bytes, parts, block_len(k, n, b), out + k * b);
}
#endif

}  // namespace

int64_t quantize(const float* x, int64_t n, int64_t b, int bits, void* out) { return quantize_t(x, n, b, bits, out); }
int64_t quantize(const double* x, int64_t n, int64_t b, int bits, void* out) { return quantize_t(x, n, b, bits, out); }
void dequantize(const void* in, int64_t n, int64_t b, int bits, float* out) { dequantize_t<false>(in, n, b, bits, out); }
void dequantize(const void* in, int64_t n, int64_t b, int bits, double* out) { dequantize_t<false>(in, n, b, bits, out); }
void dequantize_add(const void* in, int64_t n, int64_t b, int bits, float* acc) { dequantize_t<true>(in, n, b, bits, acc); }
void dequantize_add(const void* in, int64_t n, int64_t b, int bits, double* acc) { dequantize_t<true>(in, n, b, bits, acc); }

#if HIER_QUANT_F16
int64_t quantize(const f16* x, int64_t n, int64_t b, int bits, void* out) { return quantize_t(x, n, b, bits, out); }
void dequantize(const void* in, int64_t n, int64_t b, int bits, f16* out) { dequantize_t<false>(in, n, b, bits, out); }
void dequantize_sum(const void* in, int64_t part_bytes, int parts, int64_t n, int64_t b, int bits, f16* out) {
  const auto* i = static_cast<const unsigned char*>(in);
  if (bits == 8) dequantize_sum_all<8>(i, part_bytes, parts, n, b, out);
  else dequantize_sum_all<4>(i, part_bytes, parts, n, b, out);
}
#endif

}  // namespace hier::quant
