// The block program: what a pack engine executes. A datatype's typemap, reduced by src/dtype to
// a tree of N-dimensional strided blocks, stored as flat arrays of plain structs (no pointers
// inside) so that the same arrays can be copied to a GPU and walked by HIER_HD code.
//
// Packing order is the typemap order: dimensions are listed outermost first and iterate like
// nested loops; the items of a sequence are visited in order. Offsets and strides are bytes and
// may be negative.
#pragma once

#include <cstdint>

namespace hier::device {

inline constexpr int kMaxDims = 8;

enum class ItemKind : uint8_t {
  Leaf,    // one contiguous run of `width` bytes at each point of the dims
  Group,   // at each point of the dims, the child sequence `ref` relative to that point
  Gather,  // at each point of the dims, the entries [ref, ref+nref) (irregular runs)
};

struct Item {
  int64_t off = 0;     // byte offset of the first point from the enclosing origin
  int64_t width = 0;   // packed bytes at one point (leaf: the run; group/gather: one pass)
  int64_t bytes = 0;   // packed bytes of the whole item: width * prod(cnt)
  int64_t cnt[kMaxDims] = {};
  int64_t str[kMaxDims] = {};
  int32_t nd = 0;      // number of dims in use, outermost first
  int32_t ref = -1;    // group: child sequence; gather: first entry
  int32_t nref = 0;    // gather: number of entries
  ItemKind kind = ItemKind::Leaf;
  uint8_t uniform = 0; // gather: every entry has length entries[ref].len
};

struct GatherEntry {
  int64_t off;  // from the point's origin
  int64_t len;
};

struct SeqRange {
  int32_t first = 0;  // items [first, first + n)
  int32_t n = 0;
  int64_t bytes = 0;  // packed bytes of one pass
};

// A read-only view of one program. Sequence 0 is the root: one element of the datatype.
struct BlockProgram {
  const Item* items = nullptr;
  const SeqRange* seqs = nullptr;
  const GatherEntry* entries = nullptr;
  int64_t size = 0;    // packed bytes of one element (== seqs[0].bytes)
  int64_t extent = 0;  // distance between consecutive elements
  // offsets[k] == entries[k].off, densely: the uniform-width gathers read only these (half the
  // metadata traffic of the entries, which matters for single-element gathers). May be null;
  // those gathers then take the variable-width path.
  const int64_t* offsets = nullptr;
};

}  // namespace hier::device

namespace hier::device {

// Brings dims to their shortest equivalent form without changing the visiting order: drops
// count-1 dims, merges an outer dim into the next one when it continues it (outer stride ==
// inner count * inner stride), and for a leaf folds a dense innermost dim into the width.
// Returns false when some count is zero (the item is empty).
inline bool compact_dims(Item& it) {
  int32_t w = 0;
  for (int32_t d = 0; d < it.nd; ++d) {
    if (it.cnt[d] == 0) return false;
    if (it.cnt[d] == 1) continue;
    if (w > 0 && it.str[w - 1] == it.cnt[d] * it.str[d]) {
      it.cnt[w - 1] *= it.cnt[d];
      it.str[w - 1] = it.str[d];
      continue;
    }
    it.cnt[w] = it.cnt[d];
    it.str[w] = it.str[d];
    ++w;
  }
  it.nd = w;
  if (it.kind == ItemKind::Leaf) {
    while (it.nd > 0 && it.str[it.nd - 1] == it.width) {
      it.width *= it.cnt[it.nd - 1];
      --it.nd;
      // the folded dim may now continue the one outside it
    }
  }
  int64_t pts = 1;
  for (int32_t d = 0; d < it.nd; ++d) pts *= it.cnt[d];
  it.bytes = pts * it.width;
  return true;
}

}  // namespace hier::device
