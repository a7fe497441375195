// Tree -> flat arrays. A sequence's items are contiguous in `items`; children are laid out
// after their parents, so one index (`ref`) names a child sequence.
#include <algorithm>
#include <numeric>

#include "dtype/canon.hpp"

namespace hier::dtype {
namespace {

// Runs of mixed lengths that are all multiples of a word (e.g. adjacent single doubles that
// merged into 16, 24 B runs) copy faster as equal pieces through the fixed-width gather than
// as variable-length copies, as long as that does not multiply the entries much. Returns the
// piece width, or 0 to keep the runs as they are.
int64_t uniform_piece(const std::vector<Run>& runs) {
  // 2-3 runs of 1-16 B each (a struct {double, int} with gaps): the host's mixed-width record
  // kernel copies them as they are, one fixed-size move pair per run.
  if (runs.size() <= 3 && std::all_of(runs.begin(), runs.end(), [](const Run& r) { return r.len <= 16; })) return 0;
  int64_t g = 0, total = 0;
  for (const Run& r : runs) {
    g = std::gcd(g, r.len);
    total += r.len;
  }
  if (g < 4 || (g & (g - 1)) != 0 || g > 32) return 0;
  if (total / g > 3 * static_cast<int64_t>(runs.size()) || total / g > (int64_t{1} << 24)) return 0;
  for (const Run& r : runs)
    if (r.len != g) return g;
  return 0;  // already uniform
}

int32_t lower_seq(const Seq& s, Program& p) {
  const int32_t si = static_cast<int32_t>(p.seqs.size());
  p.seqs.push_back({});
  const int32_t first = static_cast<int32_t>(p.items.size());
  p.items.resize(p.items.size() + s.size());
  int64_t bytes = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const Node& n = s[i];
    device::Item it;
    it.off = n.off;
    it.nd = n.nd;
    for (int32_t d = 0; d < n.nd; ++d) {
      it.cnt[d] = n.dim[d].cnt;
      it.str[d] = n.dim[d].str;
    }
    switch (n.kind) {
      case Node::Leaf:
        it.kind = device::ItemKind::Leaf;
        it.width = n.width;
        break;
      case Node::Gather: {
        it.kind = device::ItemKind::Gather;
        it.ref = static_cast<int32_t>(p.entries.size());
        it.width = 0;
        const int64_t piece = uniform_piece(n.runs);
        for (const Run& r : n.runs) {
          it.width += r.len;
          if (piece == 0) p.entries.push_back({r.off, r.len});
          else
            for (int64_t o = 0; o < r.len; o += piece) p.entries.push_back({r.off + o, piece});
        }
        it.nref = static_cast<int32_t>(p.entries.size() - static_cast<size_t>(it.ref));
        it.uniform = 1;
        for (int32_t k = 1; k < it.nref && it.uniform; ++k)
          it.uniform = p.entries[it.ref + k].len == p.entries[it.ref].len;
        break;
      }
      case Node::Group:
        it.kind = device::ItemKind::Group;
        it.ref = lower_seq(n.kids, p);
        it.width = p.seqs[it.ref].bytes;
        break;
    }
    it.bytes = it.width * n.points();
    bytes += it.bytes;
    p.items[first + i] = it;
  }
  p.seqs[si] = {first, static_cast<int32_t>(s.size()), bytes};
  return si;
}

}  // namespace

Program lower(const Seq& s) {
  Program p;
  lower_seq(s, p);
  p.offsets.reserve(p.entries.size());
  for (const device::GatherEntry& e : p.entries) p.offsets.push_back(e.off);
  return p;
}

}  // namespace hier::dtype
