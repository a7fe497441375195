// Random access into a block program, for the GPU backends: where packed byte q of one element
// comes from. The host backend walks a program in order (device/host.cpp); a GPU gives each
// thread a few packed bytes instead, so each thread must find its source without walking what
// comes before. Two prefix tables make that a descent of the program's tree with a binary
// search per level:
//   item_at[i]  packed offset of item i within one pass of its sequence;
//   entry_at[k] packed offset of gather entry k within one point of its item.
// Both are built once per program (program_tables), beside the program's own arrays.
#pragma once

#include <cstdint>
#include <vector>

#include "device/blocks.hpp"
#include "device/hd.hpp"
#include "device/kernels.hpp"

namespace hier::device {

// A program as a GPU kernel reads it: the program's arrays and the prefix tables, all in memory
// the kernel can read, passed by value.
struct ProgramView {
  BlockProgram p;
  const int64_t* item_at = nullptr;
  const int64_t* entry_at = nullptr;
  // The widest copy (1, 2, 4, 8 or 16 bytes) that never crosses a run and stays aligned: it
  // divides every run's length and offset, every stride, the element size and extent.
  int64_t grain = 1;
};

// The last index i in [lo, hi] with at[i] <= q (at[lo] <= q holds: a pass starts at 0).
HIER_HD inline int32_t last_at_or_below(const int64_t* at, int32_t lo, int32_t hi, int64_t q) {
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (at[mid] <= q) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Byte offset, from an element's origin, of packed byte q of that element (0 <= q < p.size).
HIER_HD inline int64_t locate(const ProgramView& v, int64_t q) {
  const BlockProgram& p = v.p;
  int64_t src = 0;
  int32_t s = 0;
  for (;;) {
    const SeqRange& r = p.seqs[s];
    const int32_t i = last_at_or_below(v.item_at, r.first, r.first + r.n - 1, q);
    const Item& it = p.items[i];
    q -= v.item_at[i];
    const int64_t point = q / it.width;
    q -= point * it.width;
    src += it.off + point_offset(it, point);
    if (it.kind == ItemKind::Leaf) return src + q;
    if (it.kind == ItemKind::Gather) {
      const int32_t e = last_at_or_below(v.entry_at, it.ref, it.ref + it.nref - 1, q);
      return src + p.entries[e].off + (q - v.entry_at[e]);
    }
    s = it.ref;  // a group: the point's pass of the child sequence
  }
}

// The prefix tables and grain of a program, built on the host (the module copies them to the
// device beside the program's arrays).
struct ProgramTables {
  std::vector<int64_t> item_at, entry_at;
  int64_t grain = 16;
};

inline int64_t grain_of(int64_t g, int64_t x) {
  if (x < 0) x = -x;
  while (g > 1 && x % g != 0) g /= 2;
  return g;
}

// n_items / n_seqs / n_entries: the sizes of the program's arrays.
inline ProgramTables program_tables(const BlockProgram& p, int32_t n_items, int32_t n_seqs, int32_t n_entries) {
  ProgramTables t;
  t.item_at.assign(static_cast<size_t>(n_items), 0);
  t.entry_at.assign(static_cast<size_t>(n_entries), 0);
  for (int32_t s = 0; s < n_seqs; ++s) {
    int64_t at = 0;
    for (int32_t i = 0; i < p.seqs[s].n; ++i) {
      const Item& it = p.items[p.seqs[s].first + i];
      t.item_at[static_cast<size_t>(p.seqs[s].first + i)] = at;
      at += it.bytes;
      t.grain = grain_of(grain_of(t.grain, it.off), it.width);
      for (int32_t d = 0; d < it.nd; ++d) t.grain = grain_of(t.grain, it.str[d]);
      if (it.kind == ItemKind::Gather) {
        int64_t e_at = 0;
        for (int32_t k = 0; k < it.nref; ++k) {
          const GatherEntry& e = p.entries[it.ref + k];
          t.entry_at[static_cast<size_t>(it.ref + k)] = e_at;
          e_at += e.len;
          t.grain = grain_of(grain_of(t.grain, e.off), e.len);
        }
      }
    }
  }
  t.grain = grain_of(grain_of(t.grain, p.size), p.extent);
  return t;
}

}  // namespace hier::device
