// The canonicalizer's working form: a tree of N-dimensional strided blocks, built constructor
// by constructor from MPI_Type_get_contents and simplified at every step. Lowered to the flat
// device::BlockProgram once complete (dtype/lower.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device/blocks.hpp"

namespace hier::dtype {

using device::kMaxDims;

struct Dim {
  int64_t cnt;
  int64_t str;
  bool operator==(const Dim&) const = default;
};

struct Run {  // one contiguous run of a gather node, relative to the node's origin
  int64_t off;
  int64_t len;
  bool operator==(const Run&) const = default;
};

struct Node;
using Seq = std::vector<Node>;  // in typemap order

struct Node {
  enum Kind : uint8_t { Leaf, Group, Gather } kind = Leaf;
  int64_t off = 0;     // origin of the first point
  int32_t nd = 0;      // dims, outermost first
  Dim dim[kMaxDims] = {};
  int64_t width = 0;   // leaf: bytes of the run
  Seq kids;            // group: what sits at each point
  std::vector<Run> runs;  // gather: what sits at each point (>= 2 runs)

  static Node leaf(int64_t off, int64_t width) {
    Node n;
    n.off = off;
    n.width = width;
    return n;
  }
  // Packed bytes at one point.
  int64_t point_bytes() const;
  int64_t points() const {
    int64_t p = 1;
    for (int32_t d = 0; d < nd; ++d) p *= dim[d].cnt;
    return p;
  }
};

// Structural equality ignoring the node's own offset (used to find regular repetitions).
bool same_shape(const Node& a, const Node& b);
bool operator==(const Node& a, const Node& b);

int64_t seq_bytes(const Seq& s);
// Number of nodes in a tree (the canonicalizer's memory budget).
size_t seq_nodes(const Seq& s);

// Builders; every result is simplified.
// `count` copies of s, `stride` bytes apart (count == 0: empty).
Seq repeat(Seq s, int64_t count, int64_t stride);
// s moved by `delta` bytes.
Seq shift(Seq s, int64_t delta);
// a then b.
void append(Seq& a, Seq b);

// Canonical simplification (see simplify.cpp): equal typemaps built by different constructors
// end up with equal trees in the common cases. Never changes the typemap order.
void simplify(Seq& s);

// Text form for TRACE logs and test failures, e.g. "leaf 8@16 [4x+64] ; gather{...}".
std::string to_string(const Seq& s);

}  // namespace hier::dtype
