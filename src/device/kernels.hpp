// Copy kernels shared by every backend (HIER_HD): moving bytes between a strided side (the
// user's buffer) and a packed side. kPack = true copies strided -> packed, false the reverse.
// Fixed widths are template parameters so that the compiler emits plain word moves instead of
// a memcpy call per block, which is what decides the speed of small blocks.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

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

// W bytes held in registers between a load and its store.
template <int W>
struct Chunk {
  char b[W];
};

// A short row of exactly N blocks of W bytes, `stride` apart (records of a few small fields:
// a struct {float, int} with a gap, `count` times, is 2 rows of 4 B per record). N and W are
// template parameters, so there is no loop and no trip-count test per record: the N blocks are
// loaded first, then stored (independent moves; a store through char* cannot delay a load).
// On unpack the stores go in row order, so overlapping blocks keep the later one.
template <int W, int N, bool kPack>
HIER_HD inline void short_row(char* packed, char* strided, int64_t stride) {
  Chunk<W> v[N];
  if constexpr (kPack) {
    for (int k = 0; k < N; ++k) memcpy(&v[k], strided + k * stride, W);
    for (int k = 0; k < N; ++k) memcpy(packed + k * W, &v[k], W);
  } else {
    for (int k = 0; k < N; ++k) memcpy(&v[k], packed + k * W, W);
    for (int k = 0; k < N; ++k) memcpy(strided + k * stride, &v[k], W);
  }
}

// n rows of W bytes, `stride` apart on the strided side, back to back on the packed side.
// Narrow rows (W <= 8) go four at a time, written out (a loop over the four is not unrolled at
// -O2): the four loads come first, so the compiler joins the stores to the packed side into one
// wide store (pack), or the loads from it into one wide load (unpack). One 4 B move per row took
// 1.3x a hand-written loop for a {float@0, int@8} struct resized to 16 B (rows of 4 B, 8 B
// apart: issue 25), which the compiler merges that way. On unpack the stores stay in row order,
// so overlapping rows keep the later one.
template <int W, bool kPack>
HIER_HD inline void rows_fixed(char* packed, char* strided, int64_t n, int64_t stride) {
  int64_t i = 0;
  if constexpr (W <= 8) {
    for (; i + 4 <= n; i += 4) {
      char* const d = packed + i * W;
      char* const q = strided + i * stride;
      Chunk<W> v0, v1, v2, v3;
      if constexpr (kPack) {
        memcpy(&v0, q, W); memcpy(&v1, q + stride, W); memcpy(&v2, q + 2 * stride, W); memcpy(&v3, q + 3 * stride, W);
        memcpy(d, &v0, W); memcpy(d + W, &v1, W); memcpy(d + 2 * W, &v2, W); memcpy(d + 3 * W, &v3, W);
      } else {
        memcpy(&v0, d, W); memcpy(&v1, d + W, W); memcpy(&v2, d + 2 * W, W); memcpy(&v3, d + 3 * W, W);
        memcpy(q, &v0, W); memcpy(q + stride, &v1, W); memcpy(q + 2 * stride, &v2, W); memcpy(q + 3 * stride, &v3, W);
      }
    }
  }
  for (; i < n; ++i) {
    if constexpr (kPack) move_fixed<W>(packed + i * W, strided + i * stride);
    else move_fixed<W>(strided + i * stride, packed + i * W);
  }
}

// A run of len bytes in size class C: len == 1 for C = 1, else C <= len <= 2C (16 B in class
// 8). Two overlapping moves of C bytes cover any such length (the overlap is written twice
// with the same bytes), so a run whose length is known only at run time costs no memcpy call.
template <int C, bool kPack>
HIER_HD inline void move_class(char* packed, char* strided, int64_t len) {
  char* d = kPack ? packed : strided;
  const char* s = kPack ? strided : packed;
  if constexpr (C == 1) {
    *d = *s;
  } else {
    Chunk<C> a, b;
    memcpy(&a, s, C);
    memcpy(&b, s + len - C, C);
    memcpy(d, &a, C);
    memcpy(d + len - C, &b, C);
  }
}

// 1..16 bytes, the class chosen at run time (a record's runs take the same branches at every
// record, which the branch predictor learns).
template <bool kPack>
HIER_HD inline void move_small(char* packed, char* strided, int64_t len) {
  if (len >= 8) move_class<8, kPack>(packed, strided, len);
  else if (len >= 4) move_class<4, kPack>(packed, strided, len);
  else if (len >= 2) move_class<2, kPack>(packed, strided, len);
  else move_class<1, kPack>(packed, strided, len);
}

// One record of runs of 1..16 bytes of differing lengths (a struct {double, char} with gaps):
// the runs at origin + off[k], packed back to back at packed + at[k]. With the size classes
// C... known (2 or 3 runs: chosen once per program) every move has a fixed size; otherwise
// (N runs) each run picks its class.
template <bool kPack, int... C, size_t... K>
HIER_HD inline void class_record(char* packed, char* origin, const int64_t* off, const int64_t* len,
                                 const int64_t* at, std::index_sequence<K...>) {
  (move_class<C, kPack>(packed + at[K], origin + off[K], len[K]), ...);
}

template <int N, bool kPack>
HIER_HD inline void small_record(char* packed, char* origin, const int64_t* off, const int64_t* len,
                                 const int64_t* at) {
  for (int k = 0; k < N; ++k) move_small<kPack>(packed + at[k], origin + off[k], len[k]);
}

template <bool kPack>
HIER_HD inline void rows_var(char* packed, char* strided, int64_t n, int64_t stride, int64_t w) {
  for (int64_t i = 0; i < n; ++i) move_dir<kPack>(packed + i * w, strided + i * stride, w);
}

// Gather/scatter of irregular runs of one fixed width (irregular indexed types), at the offsets
// `off` (BlockProgram::offsets: 8 bytes per run instead of a 16-byte entry). Four runs at
// a time, their offsets and data loaded before anything is stored: a store through char* may
// alias the entry table, so one run per iteration would wait for each store before the next
// offset load, and the copies would not overlap their cache misses.
template <int W, bool kPack>
HIER_HD inline void gather_fixed(char* packed, char* origin, const int64_t* off, int32_t n) {
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    char* const q0 = origin + off[i];
    char* const q1 = origin + off[i + 1];
    char* const q2 = origin + off[i + 2];
    char* const q3 = origin + off[i + 3];
    char* const d = packed + static_cast<int64_t>(i) * W;
    Chunk<W> v0, v1, v2, v3;
    if constexpr (kPack) {
      memcpy(&v0, q0, W); memcpy(&v1, q1, W); memcpy(&v2, q2, W); memcpy(&v3, q3, W);
      memcpy(d, &v0, W); memcpy(d + W, &v1, W); memcpy(d + 2 * W, &v2, W); memcpy(d + 3 * W, &v3, W);
    } else {
      memcpy(&v0, d, W); memcpy(&v1, d + W, W); memcpy(&v2, d + 2 * W, W); memcpy(&v3, d + 3 * W, W);
      memcpy(q0, &v0, W); memcpy(q1, &v1, W); memcpy(q2, &v2, W); memcpy(q3, &v3, W);
    }
  }
  for (; i < n; ++i) {
    if constexpr (kPack) move_fixed<W>(packed + static_cast<int64_t>(i) * W, origin + off[i]);
    else move_fixed<W>(origin + off[i], packed + static_cast<int64_t>(i) * W);
  }
}

// Runs of differing lengths: one memcpy each. Its size-class copies (overlapping loads and
// stores) beat move_var's bit-by-bit tail when consecutive lengths differ, because they do not
// depend on unpredictable branches per 16/8/4 bytes. Irregular runs defeat the hardware
// prefetcher, so on the host the run 8 ahead is prefetched.
template <bool kPack>
HIER_HD inline void gather_var(char* packed, char* origin, const GatherEntry* e, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
    if (i + 8 < n) __builtin_prefetch(origin + e[i + 8].off, kPack ? 0 : 1);
#endif
    const int64_t len = e[i].len;
    if constexpr (kPack) memcpy(packed, origin + e[i].off, static_cast<size_t>(len));
    else memcpy(origin + e[i].off, packed, static_cast<size_t>(len));
    packed += len;
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
