// The wire format of a quantized buffer (issue 13). It crosses the network between ranks, so it
// depends on nothing of the host: every field has a fixed width and byte order.
//
// A buffer of n values (float32 or float64) cut into blocks of B values (the last one holds
// n - (nblocks-1)*B, 1..B values) is stored as nblocks RECORDS back to back, one per block:
//
//   record = [scale: float32, IEEE 754 binary32, little-endian] [payload]
//   payload, int8: len bytes, value i of the block is byte i, two's complement in [-127, 127]
//   payload, int4: ceil(len/2) bytes, value i of the block is in byte i/2: the LOW nibble for
//                  even i, the HIGH nibble for odd i, two's complement in [-7, 7]; an odd len
//                  leaves the last high nibble 0.
//
// Value i of the block dequantizes to q_i * scale. Records are interleaved (not [all scales]
// [all payload]) so that any run of whole blocks is one contiguous byte range: a schedule can
// pipeline or shard a quantized buffer at block boundaries, and a GPU thread block finds its
// record at blk * record_bytes(B) with nothing else to read. B is a multiple of 8 so that every
// record (4 + B or 4 + B/2 bytes) keeps the next scale 4-byte aligned when the buffer is.
//
// Scale of a block (quant/kernels.hpp computes it): s = absmax / Q (Q = 127 or 7), rounded so
// that Q*s >= absmax where possible and Q*s stays finite; s = 0 for an all-zero block. A block
// that cannot be quantized (a NaN or an Inf in it; for float64 also absmax / Q above the float32
// range) gets s = NaN and a zero payload: it dequantizes to NaN everywhere, never to a number,
// and quantize() counts such blocks so that the caller can send the buffer exactly instead.
#pragma once

#include <cstdint>

#include "device/hd.hpp"

namespace hier::quant {

inline constexpr int64_t kMinBlock = 8;
inline constexpr int64_t kMaxBlock = int64_t{1} << 16;
// The default of HIER_QUANT_BLOCK (config::Config::quant_block must equal it: tests/quant;
// the choice is argued in docs/quantization.md, "Block size"). Chosen by bench/quant --sweep
// (bench/RESULTS.md, "Quantization kernels"): throughput is flat from 128-256 values up; 512
// keeps the scales at 0.8% (int8) / 1.6% (int4) of the payload while a block stays small enough
// for a small absmax per block (the error is s/2 per value).
inline constexpr int64_t kDefaultBlock = 512;

HIER_HD constexpr bool valid_block(int64_t b) { return b >= kMinBlock && b <= kMaxBlock && b % 8 == 0; }
HIER_HD constexpr bool valid_bits(int bits) { return bits == 8 || bits == 4; }
HIER_HD constexpr int qmax(int bits) { return bits == 8 ? 127 : 7; }

HIER_HD constexpr int64_t num_blocks(int64_t n, int64_t b) { return (n + b - 1) / b; }
HIER_HD constexpr int64_t payload_bytes(int64_t len, int bits) { return bits == 8 ? len : (len + 1) / 2; }
HIER_HD constexpr int64_t record_bytes(int64_t len, int bits) { return 4 + payload_bytes(len, bits); }
// Byte offset of block k's record (k < num_blocks): every block before it is full.
HIER_HD constexpr int64_t record_offset(int64_t k, int64_t b, int bits) { return k * record_bytes(b, bits); }
// Values in block k of a buffer of n values.
HIER_HD constexpr int64_t block_len(int64_t k, int64_t n, int64_t b) { return n - k * b < b ? n - k * b : b; }
// Size of the whole quantized buffer.
HIER_HD constexpr int64_t quantized_bytes(int64_t n, int64_t b, int bits) {
  const int64_t nb = num_blocks(n, b);
  return nb == 0 ? 0 : (nb - 1) * record_bytes(b, bits) + record_bytes(block_len(nb - 1, n, b), bits);
}

}  // namespace hier::quant
