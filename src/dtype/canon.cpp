#include "dtype/canon.hpp"

#include <algorithm>
#include <vector>

#include "device/backend.hpp"

#include "diag/log.hpp"
#include "dtype/decode.hpp"
#include "dtype/signature.hpp"

namespace hier::dtype {
namespace {

// Contiguous runs per pass of sequence s, and the narrowest.
void count_blocks(const Program& p, int32_t s, int64_t& blocks, int64_t& min_block) {
  const device::SeqRange& r = p.seqs[s];
  for (int32_t i = 0; i < r.n; ++i) {
    const device::Item& it = p.items[r.first + i];
    int64_t pts = 1;
    for (int32_t d = 0; d < it.nd; ++d) pts *= it.cnt[d];
    switch (it.kind) {
      case device::ItemKind::Leaf:
        blocks += pts;
        min_block = std::min(min_block, it.width);
        break;
      case device::ItemKind::Gather:
        blocks += pts * it.nref;
        for (int32_t k = 0; k < it.nref; ++k) min_block = std::min(min_block, p.entries[it.ref + k].len);
        break;
      case device::ItemKind::Group: {
        int64_t b = 0;
        count_blocks(p, it.ref, b, min_block);
        blocks += pts * b;
        break;
      }
    }
  }
}

// [lo, hi) of the bytes one pass of sequence s touches, relative to its origin; false if empty.
bool seq_bounds(const Program& p, int32_t s, int64_t& lo, int64_t& hi) {
  bool any = false;
  const device::SeqRange& r = p.seqs[s];
  for (int32_t i = 0; i < r.n; ++i) {
    const device::Item& it = p.items[r.first + i];
    int64_t a = 0, b = 0;
    switch (it.kind) {
      case device::ItemKind::Leaf: a = 0; b = it.width; break;
      case device::ItemKind::Gather:
        a = INT64_MAX; b = INT64_MIN;
        for (int32_t k = 0; k < it.nref; ++k) {
          const device::GatherEntry& e = p.entries[it.ref + k];
          a = std::min(a, e.off);
          b = std::max(b, e.off + e.len);
        }
        break;
      case device::ItemKind::Group:
        if (!seq_bounds(p, it.ref, a, b)) continue;
        break;
    }
    a += it.off;
    b += it.off;
    for (int32_t d = 0; d < it.nd; ++d) {
      const int64_t span = (it.cnt[d] - 1) * it.str[d];
      (span < 0 ? a : b) += span;
    }
    lo = any ? std::min(lo, a) : a;
    hi = any ? std::max(hi, b) : b;
    any = true;
  }
  return any;
}

// Open MPI 4.1 drops zero-length members when it optimizes a type and can then treat a type
// with gaps as contiguous (count 2 of struct{1 byte@77, empty@91} packs bytes 77 and 78). For
// types with zero-length members the engine's result for two elements is compared with the
// MPI's own PMPI_Pack once, at commit; a difference (or a span too large to check) passes the
// type through. MPICH needs no check: its true bounds already disagree for these types.
bool agrees_with_mpi(MPI_Datatype t, const Canon& c) {
#if defined(OMPI_MAJOR_VERSION)
  if (c.size == 0) return true;
  const int64_t lo = std::min<int64_t>(c.true_lb, c.true_lb + c.extent);
  const int64_t hi = std::max<int64_t>(c.true_lb + c.true_extent, c.true_lb + c.extent + c.true_extent);
  if (hi - lo > (int64_t{1} << 20)) return false;
  // Open MPI's result for such types can depend on the buffer's address (a random type once
  // packed differently in one test run of three): every alignment modulo 16 must agree.
  std::vector<char> src(static_cast<size_t>(hi - lo + 16));
  uint32_t x = 0x9e3779b9u;
  for (char& b : src) {
    x ^= x << 13; x ^= x >> 17; x ^= x << 5;
    b = static_cast<char>(x);
  }
  std::vector<char> ref(static_cast<size_t>(2 * c.size)), mine(ref.size());
  for (int shift = 0; shift < 16; ++shift) {
    const char* base = src.data() + shift - lo;
    int pos = 0;
    if (PMPI_Pack(base, 2, t, ref.data(), static_cast<int>(ref.size()), &pos, MPI_COMM_SELF) != MPI_SUCCESS ||
        pos != static_cast<int>(ref.size()))
      return false;
    device::host().pack(c.view, base, 2, mine.data());
    if (ref != mine) return false;
  }
  return true;
#else
  (void)t;
  (void)c;
  return true;
#endif
}

}  // namespace

Canon* canonicalize(MPI_Datatype t) {
  Canon* c = new Canon;
  MPI_Count size = 0, lb = 0, ext = 0, tlb = 0, text = 0;
  PMPI_Type_size_x(t, &size);
  PMPI_Type_get_extent_x(t, &lb, &ext);
  PMPI_Type_get_true_extent_x(t, &tlb, &text);
  c->size = size;
  c->lb = lb;
  c->extent = ext;
  c->true_lb = tlb;
  c->true_extent = text;
  c->elem = signature_elem_walk(t);
  if (size == MPI_UNDEFINED || ext == MPI_UNDEFINED) {
    c->why = "size or extent beyond MPI_Count";
    return c;
  }
  bool empty_parts = false;
  std::optional<Seq> s = decode(t, c->why, &empty_parts);
  if (!s) return c;
  if (seq_bytes(*s) != size) {  // the decoder's typemap disagrees with the MPI: never guess
    c->why = "decoded size " + std::to_string(seq_bytes(*s)) + " != MPI size " + std::to_string(size);
    HIER_WARN("dtype", "canonical form disagrees with the MPI (%s): passing this type through", c->why.c_str());
    return c;
  }
  c->prog = lower(*s);
  // The MPI's own true bounds must agree with the typemap we decoded. They do not where the MPI
  // deviates from the standard (Open MPI 4.1 takes a stride of exactly -1 byte as "the natural
  // extent"): then the MPI's behaviour is the one to keep, so the type is passed through.
  int64_t lo = 0, hi = 0;
  if (size > 0 && seq_bounds(c->prog, 0, lo, hi) && (lo != tlb || hi - lo != text)) {
    c->why = "the MPI's true extent disagrees with the typemap";
    HIER_INFO("dtype", "%s ([%lld, +%lld) vs MPI [%lld, +%lld)): passing this type through", c->why.c_str(),
              (long long)lo, (long long)(hi - lo), (long long)tlb, (long long)text);
    c->prog = {};
    return c;
  }
  c->view = {c->prog.items.data(), c->prog.seqs.data(), c->prog.entries.data(), size, ext, c->prog.offsets.data()};
  c->min_block = INT64_MAX;
  count_blocks(c->prog, 0, c->blocks, c->min_block);
  if (c->blocks == 0) c->min_block = 0;
  const device::SeqRange& root = c->prog.seqs[0];
  c->dense = root.n == 1 && c->prog.items[root.first].kind == device::ItemKind::Leaf && c->prog.items[root.first].nd == 0;
  c->contiguous = size == 0 || (c->dense && size == ext);
  if (empty_parts && !agrees_with_mpi(t, *c)) {
    c->why = "zero-length members the MPI packs differently";
    HIER_INFO("dtype", "%s: passing this type through", c->why.c_str());
    c->prog = {};
    return c;
  }
  c->ok = true;
  HIER_TRACE("dtype", "canonical form: %s (size %lld extent %lld, %lld blocks)", to_string(*s).c_str(), (long long)size,
             (long long)ext, (long long)c->blocks);
  return c;
}

}  // namespace hier::dtype
