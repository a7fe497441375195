// Decoding follows the MPI standard's definition of each constructor's typemap; extents of
// inner types come from PMPI_Type_get_extent_x, so resized types, lower bounds and MPI_LB/UB
// markers are honoured without being modelled. Intermediate types returned by get_contents
// are freed unless predefined (the standard requires it; both MPIs hand out references).
#include "dtype/decode.hpp"

#include <cstddef>
#include <vector>

namespace hier::dtype {
namespace {

constexpr size_t kMaxNodes = size_t{1} << 18;  // beyond this, the MPI's own engine does it

struct Envelope {
  int combiner = MPI_COMBINER_NAMED;
  int64_t ni = 0, na = 0, nc = 0, nt = 0;
};

Envelope envelope(MPI_Datatype t) {
  Envelope e;
#if MPI_VERSION >= 4
  MPI_Count ni = 0, na = 0, nc = 0, nt = 0;
  PMPI_Type_get_envelope_c(t, &ni, &na, &nc, &nt, &e.combiner);
  e.ni = ni; e.na = na; e.nc = nc; e.nt = nt;
#else
  int ni = 0, na = 0, nt = 0;
  PMPI_Type_get_envelope(t, &ni, &na, &nt, &e.combiner);
  e.ni = ni; e.na = na; e.nt = nt;
#endif
  return e;
}

// The arguments of a derived type's constructor; frees the returned derived types on scope exit.
struct Contents {
  std::vector<int64_t> ints;
  std::vector<int64_t> aints;
  std::vector<MPI_Datatype> types;

  ~Contents() {
    for (MPI_Datatype& t : types)
      if (t != MPI_DATATYPE_NULL && !is_named(t)) PMPI_Type_free(&t);
  }
};

bool contents(MPI_Datatype t, const Envelope& e, Contents& c) {
  if (e.nc != 0) return false;  // built with a large-count (_c) constructor: not decoded
  std::vector<int> ints(static_cast<size_t>(e.ni));
  std::vector<MPI_Aint> aints(static_cast<size_t>(e.na));
  c.types.assign(static_cast<size_t>(e.nt), MPI_DATATYPE_NULL);
#if MPI_VERSION >= 4
  MPI_Count dummy = 0;
  if (PMPI_Type_get_contents_c(t, e.ni, e.na, 0, e.nt, ints.data(), aints.data(), &dummy, c.types.data()) != MPI_SUCCESS)
    return false;
#else
  if (PMPI_Type_get_contents(t, static_cast<int>(e.ni), static_cast<int>(e.na), static_cast<int>(e.nt), ints.data(),
                             aints.data(), c.types.data()) != MPI_SUCCESS)
    return false;
#endif
  c.ints.assign(ints.begin(), ints.end());
  c.aints.assign(aints.begin(), aints.end());
  return true;
}

int64_t extent_of(MPI_Datatype t) {
  MPI_Count lb = 0, ext = 0;
  PMPI_Type_get_extent_x(t, &lb, &ext);
  return ext;
}

struct PairLayout {
  MPI_Datatype t;
  int64_t second_off;  // offset of the int member
  int64_t first_len;
};

template <class T>
constexpr PairLayout pair(MPI_Datatype t) {
  struct S { T v; int i; };
  return {t, static_cast<int64_t>(offsetof(S, i)), static_cast<int64_t>(sizeof(T))};
}

std::optional<Seq> named(MPI_Datatype t, std::string& why) {
  MPI_Count size = 0, tlb = 0, text = 0;
  PMPI_Type_size_x(t, &size);
  PMPI_Type_get_true_extent_x(t, &tlb, &text);
  if (size == 0) return Seq{};
#if defined(MPICH_VERSION)
  // MPICH copies long doubles as x87 values: 10 of the 16 bytes; its packed bytes are not a
  // copy of memory, so only MPICH itself can produce them.
  if (t == MPI_LONG_DOUBLE || t == MPI_LONG_DOUBLE_INT || t == MPI_C_LONG_DOUBLE_COMPLEX) {
    why = "long double (MPICH packs its 10 significant bytes)";
    return std::nullopt;
  }
#endif
  if (tlb == 0 && text == size) return Seq{Node::leaf(0, size)};
  // The value-index pair types of MINLOC/MAXLOC have a gap between their two members.
  const PairLayout pairs[] = {pair<float>(MPI_FLOAT_INT), pair<double>(MPI_DOUBLE_INT), pair<long>(MPI_LONG_INT),
                              pair<short>(MPI_SHORT_INT), pair<long double>(MPI_LONG_DOUBLE_INT)};
  for (const PairLayout& p : pairs) {
    if (p.t != t) continue;
    if (size != p.first_len + static_cast<int64_t>(sizeof(int)) || tlb != 0 ||
        text != p.second_off + static_cast<int64_t>(sizeof(int))) break;
    Seq s{Node::leaf(0, p.first_len), Node::leaf(p.second_off, sizeof(int))};
    simplify(s);
    return s;
  }
  why = "predefined type with an unknown layout";
  return std::nullopt;
}

// count blocks: block i is bl[i] elements of `sub` (extent ext) at byte displacement disp[i].
Seq indexed(const Seq& sub, int64_t ext, const std::vector<int64_t>& bl, const std::vector<int64_t>& disp) {
  Seq out;
  // The common case (a contiguous element): one gather node of runs, cheap in memory.
  if (sub.size() == 1 && sub[0].kind == Node::Leaf && sub[0].nd == 0 && sub[0].width == ext) {
    Node g;
    g.kind = Node::Gather;
    g.runs.reserve(bl.size());
    for (size_t i = 0; i < bl.size(); ++i)
      if (bl[i] > 0) g.runs.push_back({disp[i] + sub[0].off, bl[i] * ext});
    if (g.runs.empty()) return out;
    out.push_back(std::move(g));
    simplify(out);
    return out;
  }
  for (size_t i = 0; i < bl.size(); ++i) append(out, shift(repeat(sub, bl[i], ext), disp[i]));
  simplify(out);
  return out;
}

struct Decoder {
  std::string& why;
  size_t nodes = 0;
  bool empty_parts = false;

  bool budget(const Seq& s) {
    nodes += seq_nodes(s);
    if (nodes <= kMaxNodes) return true;
    why = "too many blocks";
    return false;
  }

  std::optional<Seq> run(MPI_Datatype t, int depth) {
    if (depth > 64) {
      why = "nesting too deep";
      return std::nullopt;
    }
    const Envelope e = envelope(t);
    if (e.combiner == MPI_COMBINER_NAMED) return named(t, why);
    Contents c;
    if (!contents(t, e, c)) {
      why = "large-count constructor";
      return std::nullopt;
    }
    const auto& I = c.ints;
    const auto& A = c.aints;
    auto sub = [&](size_t k) { return run(c.types[k], depth + 1); };
    std::optional<Seq> r;
    switch (e.combiner) {
      case MPI_COMBINER_DUP:
      case MPI_COMBINER_RESIZED:  // same typemap; the new bounds are read from the MPI when used
        r = sub(0);
        break;
      case MPI_COMBINER_CONTIGUOUS: {
        if (I[0] == 0) empty_parts = true;
        auto s = sub(0);
        if (s) r = repeat(std::move(*s), I[0], extent_of(c.types[0]));
        break;
      }
      case MPI_COMBINER_VECTOR:
      case MPI_COMBINER_HVECTOR: {
        auto s = sub(0);
        if (!s) break;
        if (I[0] == 0 || I[1] == 0) empty_parts = true;
        const int64_t ext = extent_of(c.types[0]);
        const int64_t stride = e.combiner == MPI_COMBINER_VECTOR ? I[2] * ext : A[0];
#if defined(OMPI_MAJOR_VERSION)
        // Open MPI 4.1 reads a byte stride of exactly -1 as "the natural extent" (its internal
        // marker): its typemap is not the standard's, so only Open MPI can pack it.
        if (stride == -1 && I[0] > 1) {
          why = "the MPI's true extent disagrees with the typemap";
          return std::nullopt;
        }
#endif
        r = repeat(repeat(std::move(*s), I[1], ext), I[0], stride);
        break;
      }
      case MPI_COMBINER_INDEXED:
      case MPI_COMBINER_HINDEXED:
      case MPI_COMBINER_INDEXED_BLOCK:
      case MPI_COMBINER_HINDEXED_BLOCK: {
        auto s = sub(0);
        if (!s) break;
        const int64_t ext = extent_of(c.types[0]);
        const size_t n = static_cast<size_t>(I[0]);
        const bool block = e.combiner == MPI_COMBINER_INDEXED_BLOCK || e.combiner == MPI_COMBINER_HINDEXED_BLOCK;
        const bool bytes = e.combiner == MPI_COMBINER_HINDEXED || e.combiner == MPI_COMBINER_HINDEXED_BLOCK;
        std::vector<int64_t> bl(n), disp(n);
        for (size_t i = 0; i < n; ++i) {
          bl[i] = block ? I[1] : I[1 + i];
          if (bl[i] == 0) empty_parts = true;
          if (bytes) disp[i] = A[i];
          else disp[i] = (block ? I[2 + i] : I[1 + n + i]) * ext;
        }
        r = indexed(*s, ext, bl, disp);
        break;
      }
      case MPI_COMBINER_STRUCT: {
        const size_t n = static_cast<size_t>(I[0]);
        Seq out;
        bool ok = true;
        for (size_t i = 0; i < n && ok; ++i) {
          if (I[1 + i] == 0) {
            empty_parts = true;
            continue;
          }
          auto s = sub(i);
          if (!s) { ok = false; break; }
          append(out, shift(repeat(std::move(*s), I[1 + i], extent_of(c.types[i])), A[i]));
        }
        if (ok) {
          simplify(out);
          r = std::move(out);
        }
        break;
      }
      case MPI_COMBINER_SUBARRAY: r = subarray(c); break;
      case MPI_COMBINER_DARRAY: r = darray(c); break;
      default:
        why = "unsupported combiner " + std::to_string(e.combiner);
        return std::nullopt;
    }
    if (r && !budget(*r)) return std::nullopt;
    if (r && r->empty()) empty_parts = true;
    return r;
  }

  // Byte strides of an array's dims for the given order (dim order as the constructor lists them).
  static std::vector<int64_t> strides(const std::vector<int64_t>& sizes, int64_t ext, bool c_order) {
    const size_t n = sizes.size();
    std::vector<int64_t> st(n);
    int64_t s = ext;
    if (c_order) {
      for (size_t k = n; k-- > 0;) { st[k] = s; s *= sizes[k]; }
    } else {
      for (size_t k = 0; k < n; ++k) { st[k] = s; s *= sizes[k]; }
    }
    return st;
  }

  std::optional<Seq> subarray(Contents& c) {
    const auto& I = c.ints;
    const size_t n = static_cast<size_t>(I[0]);
    std::vector<int64_t> sizes(I.begin() + 1, I.begin() + 1 + n), subs(I.begin() + 1 + n, I.begin() + 1 + 2 * n),
        starts(I.begin() + 1 + 2 * n, I.begin() + 1 + 3 * n);
    const bool c_order = I[1 + 3 * n] == MPI_ORDER_C;
    auto s = run(c.types[0], 1);
    if (!s) return std::nullopt;
    const auto st = strides(sizes, extent_of(c.types[0]), c_order);
    Seq r = std::move(*s);
    int64_t origin = 0;
    for (size_t i = 0; i < n; ++i) {  // innermost (fastest) dim first
      const size_t k = c_order ? n - 1 - i : i;
      r = repeat(std::move(r), subs[k], st[k]);
      origin += starts[k] * st[k];
    }
    return shift(std::move(r), origin);
  }

  // A darray is a subarray whose per-dim index sets are the block / cyclic distributions of this
  // rank's coordinates in the (always row-major) process grid.
  std::optional<Seq> darray(Contents& c) {
    const auto& I = c.ints;
    const int64_t rank = I[1];
    const size_t n = static_cast<size_t>(I[2]);
    std::vector<int64_t> gs(I.begin() + 3, I.begin() + 3 + n), dist(I.begin() + 3 + n, I.begin() + 3 + 2 * n),
        darg(I.begin() + 3 + 2 * n, I.begin() + 3 + 3 * n), ps(I.begin() + 3 + 3 * n, I.begin() + 3 + 4 * n);
    const bool c_order = I[3 + 4 * n] == MPI_ORDER_C;
    std::vector<int64_t> coord(n);
    for (size_t k = n, r = static_cast<size_t>(rank); k-- > 0;) {
      coord[k] = static_cast<int64_t>(r) % ps[k];
      r /= static_cast<size_t>(ps[k]);
    }
    auto s = run(c.types[0], 1);
    if (!s) return std::nullopt;
    const auto st = strides(gs, extent_of(c.types[0]), c_order);
    Seq r = std::move(*s);
    for (size_t i = 0; i < n; ++i) {
      const size_t k = c_order ? n - 1 - i : i;
      std::vector<std::pair<int64_t, int64_t>> runs;  // (first index, length)
      if (dist[k] == MPI_DISTRIBUTE_NONE) {
        runs.push_back({0, gs[k]});
      } else if (dist[k] == MPI_DISTRIBUTE_BLOCK) {
        const int64_t b = darg[k] == MPI_DISTRIBUTE_DFLT_DARG ? (gs[k] + ps[k] - 1) / ps[k] : darg[k];
        const int64_t lo = coord[k] * b, hi = std::min(lo + b, gs[k]);
        if (hi > lo) runs.push_back({lo, hi - lo});
      } else if (dist[k] == MPI_DISTRIBUTE_CYCLIC) {
        const int64_t b = darg[k] == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg[k];
        for (int64_t lo = coord[k] * b; lo < gs[k]; lo += ps[k] * b) runs.push_back({lo, std::min(b, gs[k] - lo)});
      } else {
        why = "unknown darray distribution";
        return std::nullopt;
      }
      Seq next;
      for (auto [lo, len] : runs) append(next, shift(repeat(r, len, st[k]), lo * st[k]));
      simplify(next);
      r = std::move(next);
      if (!budget(r)) return std::nullopt;
    }
    return r;
  }
};

}  // namespace

bool is_named(MPI_Datatype t) { return envelope(t).combiner == MPI_COMBINER_NAMED; }

std::optional<Seq> decode(MPI_Datatype t, std::string& why, bool* empty_parts) {
  Decoder d{why};
  auto r = d.run(t, 0);
  if (r) simplify(*r);
  if (empty_parts) *empty_parts = d.empty_parts;
  return r;
}

}  // namespace hier::dtype
