// The host backend: walks a block program on the CPU with the HIER_HD kernels. Leaves are
// dispatched once per item to a width-specialized row loop; only the outer dims pay for the
// generic odometer.
#include <algorithm>
#include <array>
#include <utility>

#include "device/backend.hpp"
#include "device/kernels.hpp"

namespace hier::device {

// device/reduce_host.cpp
bool host_reduce(ReduceOp op, ElemType t, const void* in, void* inout, int64_t n);

namespace {

// Calls f(pointer) for every point of dims [0, nd), in row-major order.
template <class F>
inline void odometer(const int64_t* cnt, const int64_t* str, int32_t nd, char* o, F&& f) {
  switch (nd) {
    case 0: f(o); return;
    case 1:
      for (int64_t i = 0; i < cnt[0]; ++i) f(o + i * str[0]);
      return;
    case 2:
      for (int64_t i = 0; i < cnt[0]; ++i)
        for (int64_t j = 0; j < cnt[1]; ++j) f(o + i * str[0] + j * str[1]);
      return;
    default: break;
  }
  int64_t idx[kMaxDims] = {};
  char* p = o;
  for (;;) {
    f(p);
    int32_t d = nd - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < cnt[d]) { p += str[d]; break; }
      p -= (cnt[d] - 1) * str[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// Unpacking narrow rows (8-16 B) at a stride of a cache line or more writes a few bytes into
// each line: every store misses and must first read its line, one miss after the other. The
// hardware prefetchers do not hide these read-for-ownership misses as they do loads, so the
// unpack prefetches the line of the row kAhead rows on, for writing. On the 2-core VM, the x face of a
// 68^3 grid of doubles (4096 rows of 16 B, 544 B apart; the 3D halo benchmark) unpacks in
// 11 us instead of 18 with L1/L2 cold, and rows of 8 B likewise (11 vs 17.5); rows of 32 B
// gain nothing and 64 B lose 10%, so only rows up to 16 B are prefetched (packing gains
// nothing: loads are prefetched by the hardware). A prefetch is a hint: it changes no byte.
constexpr int64_t kMaxPrefetchWidth = 16, kLine = 64, kAhead = 8;

template <int W>
inline void unpack_rows_prefetched(const char* packed, char* strided, int64_t n, int64_t stride) {
  int64_t i = 0;
  for (; i + kAhead < n; ++i) {  // only rows of this run: never a line outside the type
    __builtin_prefetch(strided + (i + kAhead) * stride, 1);
    move_fixed<W>(strided + i * stride, packed + i * W);
  }
  for (; i < n; ++i) move_fixed<W>(strided + i * stride, packed + i * W);
}

template <bool kPack>
struct Walk {
  const BlockProgram& p;
  char* packed;
  using LeafFn = void (Walk::*)(const Item&, char*);

  void seq(int32_t s, char* base) {
    const SeqRange& r = p.seqs[s];
    for (int32_t i = 0; i < r.n; ++i) item(p.items[r.first + i], base);
  }

  void item(const Item& it, char* base) {
    char* o = base + it.off;
    switch (it.kind) {
      case ItemKind::Leaf: leaf(it, o); break;
      case ItemKind::Gather: gather_item(it, o); break;
      case ItemKind::Group: odometer(it.cnt, it.str, it.nd, o, [&](char* q) { seq(it.ref, q); }); break;
    }
  }

  template <int W>
  void leaf_fixed(const Item& it, char* o) {
    const int64_t n = it.cnt[it.nd - 1], s = it.str[it.nd - 1];
    char* out = packed;
    if constexpr (!kPack && W <= kMaxPrefetchWidth) {
      if (s >= kLine || s <= -kLine) {  // every row in other cache lines: prefetch them for writing
        odometer(it.cnt, it.str, it.nd - 1, o, [n, s, &out](char* q) {
          unpack_rows_prefetched<W>(out, q, n, s);
          out += n * W;
        });
        packed = out;
        return;
      }
    }
    odometer(it.cnt, it.str, it.nd - 1, o, [n, s, &out](char* q) {
      rows_fixed<W, kPack>(out, q, n, s);
      out += n * W;
    });
    packed = out;
  }

  void leaf(const Item& it, char* o) {
    if (it.nd == 0) {
      move_dir<kPack>(packed, o, it.width);
      packed += it.width;
      return;
    }
    // Records of a few small blocks (2-4 blocks of 1-16 B at a fixed stride, under an outer
    // dim): one unrolled record copy per point instead of a row loop of 2-4 trips.
    if (it.nd >= 2)
      if (LeafFn f = small_kernel<Small::Row>(it.width, it.cnt[it.nd - 1])) return (this->*f)(it, o);
    if (LeafFn f = fixed_leaf(it.width)) return (this->*f)(it, o);
    const int64_t n = it.cnt[it.nd - 1], s = it.str[it.nd - 1], w = it.width;
    odometer(it.cnt, it.str, it.nd - 1, o, [&](char* q) {
      rows_var<kPack>(packed, q, n, s, w);
      packed += n * w;
    });
  }

  template <int W, int N>
  void leaf_short(const Item& it, char* o) {
    const int64_t s = it.str[it.nd - 1];
    char* out = packed;
    odometer(it.cnt, it.str, it.nd - 1, o, [s, &out](char* q) HIER_FORCE_INLINE {
      short_row<W, N, kPack>(out, q, s);
      out += N * W;
    });
    packed = out;
  }

  // Short rows (leaf_short) and small equal-run gathers (gather_points_n): N = 2..4 blocks of
  // W = 1..16 bytes, one table per kind, indexed by W * 3 + N - 2.
  static constexpr int64_t kMaxShortWidth = 16, kMaxShortRow = 4;
  enum class Small { Row, Gather };
  template <Small K, int W, int N>
  static constexpr LeafFn small_fn() {
    if constexpr (W == 0) return nullptr;
    else if constexpr (K == Small::Row) return &Walk::leaf_short<W, N>;
    else return &Walk::gather_points_n<W, N>;
  }
  template <Small K, size_t... I>
  static constexpr auto make_small_table(std::index_sequence<I...>) {
    return std::array<LeafFn, sizeof...(I)>{small_fn<K, static_cast<int>(I / 3), static_cast<int>(I % 3 + 2)>()...};
  }
  template <Small K>
  static LeafFn small_kernel(int64_t w, int64_t n) {
    static constexpr auto table = make_small_table<K>(std::make_index_sequence<(kMaxShortWidth + 1) * 3>{});
    if (w < 1 || w > kMaxShortWidth || n < 2 || n > kMaxShortRow) return nullptr;
    return table[static_cast<size_t>(w * 3 + n - 2)];
  }

  // Widths with a specialized row loop: multiples of 4 up to 64 B, of 8 up to 256 B.
  static constexpr int64_t kMaxFixed = 256;
  template <size_t... I>
  static constexpr auto make_table(std::index_sequence<I...>) {
    return std::array<LeafFn, sizeof...(I)>{fixed_entry<I>()...};
  }
  template <size_t I>
  static constexpr LeafFn fixed_entry() {
    constexpr int64_t w = static_cast<int64_t>(I);
    if constexpr (w > 0 && ((w % 4 == 0 && w <= 64) || w % 8 == 0 || w == 1 || w == 2))
      return &Walk::leaf_fixed<static_cast<int>(w)>;
    else
      return nullptr;
  }
  static LeafFn fixed_leaf(int64_t w) {
    static constexpr auto table = make_table(std::make_index_sequence<kMaxFixed + 1>{});
    return w >= 0 && w <= kMaxFixed ? table[static_cast<size_t>(w)] : nullptr;
  }

  // The kernel is chosen once per item, not once per point: a gather repeated at many points
  // (a struct with gaps, `count` times) runs as one tight loop.
  template <int W>
  void gather_points(const Item& it, char* o) {
    const int64_t* off = p.offsets + it.ref;
    const int32_t n = it.nref;
    char* out = packed;
    odometer(it.cnt, it.str, it.nd, o, [off, n, &out](char* q) {
      gather_fixed<W, kPack>(out, q, off, n);
      out += static_cast<int64_t>(n) * W;
    });
    packed = out;
  }

  // A handful of equal runs at every point (a struct of 2-4 same-size fields with gaps,
  // `count` times): the run count is a template parameter too, so the loop fully unrolls.
  // (Offsets and the cursor live in locals: stores through char* could alias members, which
  // would force a reload after every copy.)
  template <int W, int N>
  void gather_points_n(const Item& it, char* o) {
    int64_t off[N];
    for (int k = 0; k < N; ++k) off[k] = p.entries[it.ref + k].off;
    char* out = packed;
    odometer(it.cnt, it.str, it.nd, o, [&off, &out](char* q) HIER_FORCE_INLINE {
      char* d = out;
      for (int k = 0; k < N; ++k) {
        if constexpr (kPack) move_fixed<W>(d + k * W, q + off[k]);
        else move_fixed<W>(q + off[k], d + k * W);
      }
      out = d + N * W;
    });
    packed = out;
  }

  // A few runs of differing lengths, each at most 16 bytes, at every point (a struct of 2-8
  // small fields of different sizes with gaps, `count` times): unrolled over the runs, each
  // run two moves of its size class instead of a memcpy call. For 2 or 3 runs the classes are
  // template parameters (no branch per run); for 4-8 each run picks its class.
  template <int N, class F>
  void mixed_points(const Item& it, char* o, F&& record) {
    int64_t off[N], len[N], at[N];
    int64_t w = 0;
    for (int k = 0; k < N; ++k) {
      off[k] = p.entries[it.ref + k].off;
      len[k] = p.entries[it.ref + k].len;
      at[k] = w;
      w += len[k];
    }
    char* out = packed;
    odometer(it.cnt, it.str, it.nd, o, [&](char* q) HIER_FORCE_INLINE {
      record(out, q, off, len, at);
      out += w;
    });
    packed = out;
  }
  template <int N>
  void gather_points_mixed(const Item& it, char* o) {
    mixed_points<N>(it, o, [](char* d, char* q, const int64_t* off, const int64_t* len, const int64_t* at) HIER_FORCE_INLINE {
      small_record<N, kPack>(d, q, off, len, at);
    });
  }
  template <int... C>
  void gather_points_class(const Item& it, char* o) {
    mixed_points<sizeof...(C)>(it, o, [](char* d, char* q, const int64_t* off, const int64_t* len, const int64_t* at) HIER_FORCE_INLINE {
      class_record<kPack, C...>(d, q, off, len, at, std::make_index_sequence<sizeof...(C)>{});
    });
  }
  static constexpr int class_index(int64_t len) { return len >= 8 ? 3 : len >= 4 ? 2 : len >= 2 ? 1 : 0; }
  template <size_t... I>
  static constexpr std::array<LeafFn, sizeof...(I)> make_class2(std::index_sequence<I...>) {
    return {&Walk::gather_points_class<(1 << (I / 4)), (1 << (I % 4))>...};
  }
  template <size_t... I>
  static constexpr std::array<LeafFn, sizeof...(I)> make_class3(std::index_sequence<I...>) {
    return {&Walk::gather_points_class<(1 << (I / 16)), (1 << (I / 4 % 4)), (1 << (I % 4))>...};
  }

  static constexpr int32_t kMaxMixedRuns = 8;
  static LeafFn mixed_gather(const GatherEntry* e, int32_t n) {
    if (n < 2 || n > kMaxMixedRuns) return nullptr;
    for (int32_t k = 0; k < n; ++k)
      if (e[k].len < 1 || e[k].len > kMaxShortWidth) return nullptr;
    static constexpr auto class2 = make_class2(std::make_index_sequence<16>{});
    static constexpr auto class3 = make_class3(std::make_index_sequence<64>{});
    if (n == 2) return class2[class_index(e[0].len) * 4 + class_index(e[1].len)];
    if (n == 3) return class3[class_index(e[0].len) * 16 + class_index(e[1].len) * 4 + class_index(e[2].len)];
    static constexpr LeafFn table[kMaxMixedRuns - 3] = {&Walk::gather_points_mixed<4>, &Walk::gather_points_mixed<5>,
                                                         &Walk::gather_points_mixed<6>, &Walk::gather_points_mixed<7>,
                                                         &Walk::gather_points_mixed<8>};
    return table[n - 4];
  }

  void gather_item(const Item& it, char* o) {
    const GatherEntry* e = p.entries + it.ref;
    if (it.uniform && it.nd > 0)
      if (LeafFn f = small_kernel<Small::Gather>(e[0].len, it.nref)) return (this->*f)(it, o);
    if (!it.uniform)
      if (LeafFn f = mixed_gather(e, it.nref)) return (this->*f)(it, o);
    if (it.uniform && p.offsets) {
      switch (e[0].len) {
        case 1: return gather_points<1>(it, o);
        case 2: return gather_points<2>(it, o);
        case 4: return gather_points<4>(it, o);
        case 8: return gather_points<8>(it, o);
        case 12: return gather_points<12>(it, o);
        case 16: return gather_points<16>(it, o);
        case 24: return gather_points<24>(it, o);
        case 32: return gather_points<32>(it, o);
        case 64: return gather_points<64>(it, o);
        default: break;
      }
    }
    odometer(it.cnt, it.str, it.nd, o, [&](char* q) {
      gather_var<kPack>(packed, q, e, it.nref);
      packed += it.width;
    });
  }

  // count elements: a single-item root becomes one item with the element count as its
  // outermost dim, so that e.g. a vector repeated `count` times runs as one 2-D leaf.
  void elements(char* base, int64_t count) {
    const SeqRange& root = p.seqs[0];
    if (count == 1) return seq(0, base);
    if (root.n == 1 && p.items[root.first].nd < kMaxDims) {
      Item it = p.items[root.first];
      for (int32_t d = it.nd; d > 0; --d) {
        it.cnt[d] = it.cnt[d - 1];
        it.str[d] = it.str[d - 1];
      }
      it.cnt[0] = count;
      it.str[0] = p.extent;
      ++it.nd;
      if (!compact_dims(it)) return;
      return item(it, base);
    }
    for (int64_t e = 0; e < count; ++e) seq(0, base + e * p.extent);
  }
};

// A short message: the first `left` packed bytes, walked point by point (rare; not fast).
struct Prefix {
  const BlockProgram& p;
  const char* packed;
  int64_t left;

  bool move(char* dst, int64_t w) {
    const int64_t n = std::min(w, left);
    move_var(dst, packed, n);
    packed += n;
    left -= n;
    return left > 0;
  }
  bool seq(int32_t s, char* base) {
    const SeqRange& r = p.seqs[s];
    for (int32_t i = 0; i < r.n; ++i)
      if (!item(p.items[r.first + i], base)) return false;
    return true;
  }
  bool item(const Item& it, char* base) {
    char* o = base + it.off;
    if (it.bytes < left) {  // whole item fits: the fast walk
      Walk<false> w{p, const_cast<char*>(packed)};
      w.item(it, base);
      packed += it.bytes;
      left -= it.bytes;
      return true;
    }
    int64_t pts = 1;
    for (int32_t d = 0; d < it.nd; ++d) pts *= it.cnt[d];
    for (int64_t q = 0; q < pts; ++q) {
      char* at = o + point_offset(it, q);
      switch (it.kind) {
        case ItemKind::Leaf:
          if (!move(at, it.width)) return false;
          break;
        case ItemKind::Gather:
          for (int32_t i = 0; i < it.nref; ++i) {
            const GatherEntry& e = p.entries[it.ref + i];
            if (!move(at + e.off, e.len)) return false;
          }
          break;
        case ItemKind::Group:
          if (!seq(it.ref, at)) return false;
          break;
      }
    }
    return left > 0;
  }
};

void host_pack(const BlockProgram& p, const void* strided, int64_t count, void* packed) {
  Walk<true> w{p, static_cast<char*>(packed)};
  w.elements(const_cast<char*>(static_cast<const char*>(strided)), count);
}

void host_unpack(const BlockProgram& p, const void* packed, int64_t count, void* strided) {
  Walk<false> w{p, const_cast<char*>(static_cast<const char*>(packed))};
  w.elements(static_cast<char*>(strided), count);
}

void host_unpack_prefix(const BlockProgram& p, const void* packed, int64_t bytes, int64_t count,
                        void* strided) {
  if (bytes <= 0 || p.size <= 0) return;
  const int64_t full = std::min(count, bytes / p.size);
  if (full > 0) host_unpack(p, packed, full, strided);
  const int64_t rest = bytes - full * p.size;
  if (rest <= 0 || full >= count) return;
  Prefix pre{p, static_cast<const char*>(packed) + full * p.size, rest};
  pre.seq(0, static_cast<char*>(strided) + full * p.extent);
}

constexpr Backend kHost{"host", host_pack, host_unpack, host_unpack_prefix, host_reduce};

}  // namespace

const Backend* backend(BackendKind k) {
  switch (k) {
    case BackendKind::Host: return &kHost;
    default: return nullptr;  // GPU backends: not built in yet
  }
}

}  // namespace hier::device
