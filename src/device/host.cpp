// The host backend: walks a block program on the CPU with the HIER_HD kernels. Leaves are
// dispatched once per item to a width-specialized row loop; only the outer dims pay for the
// generic odometer.
#include <algorithm>

#include "device/backend.hpp"
#include "device/kernels.hpp"

namespace hier::device {
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

template <bool kPack>
struct Walk {
  const BlockProgram& p;
  char* packed;

  void seq(int32_t s, char* base) {
    const SeqRange& r = p.seqs[s];
    for (int32_t i = 0; i < r.n; ++i) item(p.items[r.first + i], base);
  }

  void item(const Item& it, char* base) {
    char* o = base + it.off;
    switch (it.kind) {
      case ItemKind::Leaf: leaf(it, o); break;
      case ItemKind::Gather: odometer(it.cnt, it.str, it.nd, o, [&](char* q) { gather(it, q); }); break;
      case ItemKind::Group: odometer(it.cnt, it.str, it.nd, o, [&](char* q) { seq(it.ref, q); }); break;
    }
  }

  template <int W>
  void leaf_fixed(const Item& it, char* o) {
    const int64_t n = it.cnt[it.nd - 1], s = it.str[it.nd - 1];
    odometer(it.cnt, it.str, it.nd - 1, o, [&](char* q) {
      rows_fixed<W, kPack>(packed, q, n, s);
      packed += n * W;
    });
  }

  void leaf(const Item& it, char* o) {
    if (it.nd == 0) {
      move_dir<kPack>(packed, o, it.width);
      packed += it.width;
      return;
    }
    switch (it.width) {
      case 1: return leaf_fixed<1>(it, o);
      case 2: return leaf_fixed<2>(it, o);
      case 4: return leaf_fixed<4>(it, o);
      case 8: return leaf_fixed<8>(it, o);
      case 12: return leaf_fixed<12>(it, o);
      case 16: return leaf_fixed<16>(it, o);
      case 24: return leaf_fixed<24>(it, o);
      case 32: return leaf_fixed<32>(it, o);
      case 48: return leaf_fixed<48>(it, o);
      case 64: return leaf_fixed<64>(it, o);
      default: break;
    }
    const int64_t n = it.cnt[it.nd - 1], s = it.str[it.nd - 1], w = it.width;
    odometer(it.cnt, it.str, it.nd - 1, o, [&](char* q) {
      rows_var<kPack>(packed, q, n, s, w);
      packed += n * w;
    });
  }

  void gather(const Item& it, char* o) {
    const GatherEntry* e = p.entries + it.ref;
    if (it.uniform) {
      switch (e[0].len) {
        case 1: gather_fixed<1, kPack>(packed, o, e, it.nref); break;
        case 2: gather_fixed<2, kPack>(packed, o, e, it.nref); break;
        case 4: gather_fixed<4, kPack>(packed, o, e, it.nref); break;
        case 8: gather_fixed<8, kPack>(packed, o, e, it.nref); break;
        case 16: gather_fixed<16, kPack>(packed, o, e, it.nref); break;
        case 32: gather_fixed<32, kPack>(packed, o, e, it.nref); break;
        default: gather_var<kPack>(packed, o, e, it.nref); break;
      }
    } else {
      gather_var<kPack>(packed, o, e, it.nref);
    }
    packed += it.width;
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

constexpr Backend kHost{"host", host_pack, host_unpack, host_unpack_prefix};

}  // namespace

const Backend* backend(BackendKind k) {
  switch (k) {
    case BackendKind::Host: return &kHost;
    default: return nullptr;  // GPU backends: not built in yet
  }
}

}  // namespace hier::device
