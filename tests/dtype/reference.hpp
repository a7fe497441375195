// A deliberately simple walker of a block program (point by point, no specialization): the
// reference the optimized host backend is checked against, and the coverage counter used to
// find overlapping typemaps (whose unpack result the MPI standard leaves undefined).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "device/blocks.hpp"
#include "device/kernels.hpp"

namespace hier::test {

using RunFn = std::function<void(int64_t off, int64_t len)>;

inline void walk_seq(const device::BlockProgram& p, int32_t s, int64_t base, const RunFn& fn) {
  const device::SeqRange& r = p.seqs[s];
  for (int32_t i = 0; i < r.n; ++i) {
    const device::Item& it = p.items[r.first + i];
    int64_t pts = 1;
    for (int32_t d = 0; d < it.nd; ++d) pts *= it.cnt[d];
    for (int64_t q = 0; q < pts; ++q) {
      const int64_t o = base + it.off + device::point_offset(it, q);
      switch (it.kind) {
        case device::ItemKind::Leaf: fn(o, it.width); break;
        case device::ItemKind::Gather:
          for (int32_t k = 0; k < it.nref; ++k) fn(o + p.entries[it.ref + k].off, p.entries[it.ref + k].len);
          break;
        case device::ItemKind::Group: walk_seq(p, it.ref, o, fn); break;
      }
    }
  }
}

// Every run of `count` elements, in packing order; offsets from the buffer address.
inline void walk(const device::BlockProgram& p, int64_t count, const RunFn& fn) {
  for (int64_t e = 0; e < count; ++e) walk_seq(p, 0, e * p.extent, fn);
}

}  // namespace hier::test
