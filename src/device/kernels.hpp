// Copy kernels shared by every backend (HIER_HD): moving bytes between a strided side (the
// user's buffer) and a packed side. kPack = true copies strided -> packed, false the reverse.
// Fixed widths are template parameters so that the compiler emits plain word moves instead of
// a memcpy call per block, which is what decides the speed of small blocks.
#pragma once

#include <cstdint>
#include <cstring>

#include "device/blocks.hpp"
#include "device/hd.hpp"

namespace hier::device {

template <int W>
HIER_HD inline void move_fixed(char* d, const char* s) {
  memcpy(d, s, W);  // constant size: inlined as W-byte moves, unaligned-safe
}

// Variable width: large runs go to memcpy (vectorized, prefetching); small ones are word copies.
HIER_HD inline void move_var(char* d, const char* s, int64_t w) {
  if (w >= 256) {
    memcpy(d, s, static_cast<size_t>(w));
    return;
  }
  while (w >= 32) { move_fixed<32>(d, s); d += 32; s += 32; w -= 32; }
  if (w & 16) { move_fixed<16>(d, s); d += 16; s += 16; }
  if (w & 8) { move_fixed<8>(d, s); d += 8; s += 8; }
  if (w & 4) { move_fixed<4>(d, s); d += 4; s += 4; }
  if (w & 2) { move_fixed<2>(d, s); d += 2; s += 2; }
  if (w & 1) { *d = *s; }
}

template <bool kPack>
HIER_HD inline void move_dir(char* packed, char* strided, int64_t w) {
  if constexpr (kPack) move_var(packed, strided, w);
  else move_var(strided, packed, w);
}

// n rows of W bytes, `stride` apart on the strided side, back to back on the packed side.
template <int W, bool kPack>
HIER_HD inline void rows_fixed(char* packed, char* strided, int64_t n, int64_t stride) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (kPack) move_fixed<W>(packed + i * W, strided + i * stride);
    else move_fixed<W>(strided + i * stride, packed + i * W);
  }
}

template <bool kPack>
HIER_HD inline void rows_var(char* packed, char* strided, int64_t n, int64_t stride, int64_t w) {
  for (int64_t i = 0; i < n; ++i) move_dir<kPack>(packed + i * w, strided + i * stride, w);
}

// Gather/scatter of irregular runs of one fixed width (irregular indexed types).
template <int W, bool kPack>
HIER_HD inline void gather_fixed(char* packed, char* origin, const GatherEntry* e, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    if constexpr (kPack) move_fixed<W>(packed + static_cast<int64_t>(i) * W, origin + e[i].off);
    else move_fixed<W>(origin + e[i].off, packed + static_cast<int64_t>(i) * W);
  }
}

template <bool kPack>
HIER_HD inline void gather_var(char* packed, char* origin, const GatherEntry* e, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    move_dir<kPack>(packed, origin + e[i].off, e[i].len);
    packed += e[i].len;
  }
}

// Byte offset of point `p` (row-major over the item's dims) from the item's origin: lets a GPU
// give every thread one point without walking an odometer.
HIER_HD inline int64_t point_offset(const Item& it, int64_t p) {
  int64_t off = 0;
  for (int32_t d = it.nd - 1; d >= 0; --d) {
    const int64_t c = it.cnt[d];
    off += (p % c) * it.str[d];
    p /= c;
  }
  return off;
}

}  // namespace hier::device
