// Canonical simplification of the strided-block tree. Every rule keeps the typemap order (the
// order MPI_Pack writes bytes in), so dims are never reordered; within that constraint:
//   - count-1 dims are dropped, a dim continuing the next one is merged into it, a dense
//     innermost dim of a leaf is folded into the block width;
//   - a group around a single child becomes that child with the group's dims in front;
//   - a dimensionless group is spliced into the enclosing sequence;
//   - consecutive dimensionless runs are merged into one gather, adjacent runs joined, and a
//     gather whose runs are equal-length and equally spaced becomes a strided leaf;
//   - consecutive nodes of equal shape at equally spaced offsets become one node with an
//     outer dim.
// So vector, hvector, subarray, indexed with regular displacements and struct of repeated
// members describing the same bytes in the same order all reach the same tree.
#include <utility>

#include "dtype/ir.hpp"

namespace hier::dtype {
namespace {

// Returns false when the node is empty.
bool compact(Node& n) {
  int32_t w = 0;
  for (int32_t d = 0; d < n.nd; ++d) {
    if (n.dim[d].cnt <= 0) return false;
    if (n.dim[d].cnt == 1) continue;
    if (w > 0 && n.dim[w - 1].str == n.dim[d].cnt * n.dim[d].str) {
      n.dim[w - 1].cnt *= n.dim[d].cnt;
      n.dim[w - 1].str = n.dim[d].str;
      continue;
    }
    n.dim[w++] = n.dim[d];
  }
  for (int32_t d = w; d < n.nd; ++d) n.dim[d] = {};
  n.nd = w;
  if (n.kind == Node::Leaf) {
    if (n.width <= 0) return false;
    while (n.nd > 0 && n.dim[n.nd - 1].str == n.width) {
      n.width *= n.dim[n.nd - 1].cnt;
      n.dim[--n.nd] = {};
    }
  }
  return true;
}

bool simplify_gather(Node& n) {
  std::vector<Run> out;
  out.reserve(n.runs.size());
  for (const Run& r : n.runs) {
    if (r.len <= 0) continue;
    if (!out.empty() && out.back().off + out.back().len == r.off) out.back().len += r.len;
    else out.push_back(r);
  }
  n.runs = std::move(out);
  if (n.runs.empty()) return false;
  if (n.runs.size() == 1) {
    n.kind = Node::Leaf;
    n.off += n.runs[0].off;
    n.width = n.runs[0].len;
    n.runs.clear();
    return compact(n);
  }
  // Normalize so that the first run sits at the node's origin.
  const int64_t o0 = n.runs[0].off;
  if (o0 != 0) {
    n.off += o0;
    for (Run& r : n.runs) r.off -= o0;
  }
  if (n.nd < kMaxDims) {
    const int64_t len = n.runs[0].len, step = n.runs[1].off - n.runs[0].off;
    bool regular = true;
    for (size_t i = 1; i < n.runs.size() && regular; ++i)
      regular = n.runs[i].len == len && n.runs[i].off - n.runs[i - 1].off == step;
    if (regular) {
      n.kind = Node::Leaf;
      n.width = len;
      n.dim[n.nd++] = {static_cast<int64_t>(n.runs.size()), step};
      n.runs.clear();
    }
  }
  return compact(n);
}

bool simplify_node(Node& n) {
  switch (n.kind) {
    case Node::Leaf: return compact(n);
    case Node::Gather: return simplify_gather(n);
    case Node::Group: {
      simplify(n.kids);
      if (n.kids.empty()) return false;
      if (!compact(n)) return false;
      if (n.kids.size() == 1 && n.nd + n.kids[0].nd <= kMaxDims) {
        Node k = std::move(n.kids[0]);
        Node m = std::move(k);
        // outer dims (the group's) first, then the child's
        for (int32_t d = m.nd - 1; d >= 0; --d) m.dim[d + n.nd] = m.dim[d];
        for (int32_t d = 0; d < n.nd; ++d) m.dim[d] = n.dim[d];
        m.nd += n.nd;
        m.off += n.off;
        n = std::move(m);
        return simplify_node(n);
      }
      return true;
    }
  }
  return true;
}

// One pass of the sequence rules; returns whether anything changed.
bool pass(Seq& s) {
  bool changed = false;
  Seq out;
  out.reserve(s.size());
  for (Node& n : s) {
    if (!simplify_node(n)) { changed = true; continue; }
    if (n.kind == Node::Group && n.nd == 0) {  // a bare subsequence: splice it in
      for (Node& k : n.kids) {
        k.off += n.off;
        out.push_back(std::move(k));
      }
      changed = true;
      continue;
    }
    out.push_back(std::move(n));
  }
  s.clear();
  // Consecutive dimensionless leaves and gathers -> one gather.
  for (size_t i = 0; i < out.size();) {
    auto flat = [&](const Node& n) { return n.nd == 0 && n.kind != Node::Group; };
    size_t j = i;
    while (j < out.size() && flat(out[j])) ++j;
    if (j - i >= 2) {
      Node g;
      g.kind = Node::Gather;
      g.off = out[i].off;
      for (size_t k = i; k < j; ++k) {
        const Node& x = out[k];
        if (x.kind == Node::Leaf) g.runs.push_back({x.off - g.off, x.width});
        else for (const Run& r : x.runs) g.runs.push_back({x.off - g.off + r.off, r.len});
      }
      if (simplify_gather(g)) s.push_back(std::move(g));
      changed = true;
      i = j;
    } else if (j > i) {
      s.push_back(std::move(out[i]));
      ++i;
    } else {
      s.push_back(std::move(out[i]));
      ++i;
    }
  }
  // Equal shapes at equal spacing -> one node with an outer dim.
  out.clear();
  for (size_t i = 0; i < s.size();) {
    size_t j = i + 1;
    if (j < s.size() && same_shape(s[i], s[j])) {
      const int64_t step = s[j].off - s[i].off;
      while (j + 1 < s.size() && same_shape(s[i], s[j + 1]) && s[j + 1].off - s[j].off == step) ++j;
      ++j;
    }
    const int64_t k = static_cast<int64_t>(j - i);
    if (k >= 2) {
      const int64_t step = s[i + 1].off - s[i].off;
      Node n = std::move(s[i]);
      if (n.nd < kMaxDims) {
        for (int32_t d = n.nd; d > 0; --d) n.dim[d] = n.dim[d - 1];
        n.dim[0] = {k, step};
        ++n.nd;
      } else {
        Node g;
        g.kind = Node::Group;
        g.off = n.off;
        n.off = 0;
        g.nd = 1;
        g.dim[0] = {k, step};
        g.kids.push_back(std::move(n));
        n = std::move(g);
      }
      simplify_node(n);
      out.push_back(std::move(n));
      changed = true;
    } else {
      out.push_back(std::move(s[i]));
    }
    i = j;
  }
  s = std::move(out);
  return changed;
}

}  // namespace

void simplify(Seq& s) {
  for (int guard = 0; guard < 16 && pass(s); ++guard) {
  }
}

}  // namespace hier::dtype
