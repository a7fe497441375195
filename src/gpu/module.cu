// The GPU backend module (device/module.hpp), one source for every device: nvcc builds it as
// libhier-cuda.so, hipcc as libhier-hip.so, and the host compiler as libhier-sim.so (the
// simulated device of the tests, through gpu/module_sim.cpp). Where the runtimes differ, only
// gpu/shim.hpp knows. The kernels are the HIER_HD bodies the host backend runs:
//   - pack / unpack: each thread takes `G` packed bytes at a time (G = the program's grain, at
//     most 16, never crossing a run) and finds their source with device/locate.hpp;
//   - reductions: device/reduce.hpp over the type table device/reduce_types.def;
//   - quantization: one warp per format block, adjacent lanes on adjacent 16-byte chunks of
//     values where the block is 16-byte aligned (else on adjacent values), the block's scale
//     from a shuffle reduction, each value through quant/kernels.hpp's operations (float,
//     double, and 16-bit floats where the compiler has them: quant/f16.hpp);
// Every kernel strides over its work by the grid's size, so any grid is correct (the simulated
// device runs a small one).
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "device/locate.hpp"
#include "device/module.hpp"
#include "device/reduce.hpp"
#include "device/reduce_table.hpp"
#include "gpu/shim.hpp"
#include "quant/format.hpp"
#include "quant/kernels.hpp"

namespace hier::gpu {
namespace {

using device::ElemType;
using device::ProgramView;
using device::ReduceOp;

constexpr unsigned kThreads = 256, kMaxBlocks = 4096;

unsigned blocks_for(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b);
}

HIER_HD inline int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
HIER_HD inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// ---- pack / unpack ---------------------------------------------------------------------------

template <int G>
struct alignas(G) Word {
  unsigned char b[G];
};

// Chunk c of the packed stream (G bytes) to or from its place in element c / (size / G).
template <bool kPack, int G>
__global__ void pack_kernel(ProgramView v, char* strided, char* packed, int64_t chunks) {
  const int64_t per = v.p.size / G;
  for (int64_t c = first_index(); c < chunks; c += grid_stride()) {
    const int64_t e = c / per;
    char* s = strided + e * v.p.extent + device::locate(v, (c - e * per) * G);
    auto* d = reinterpret_cast<Word<G>*>(packed + c * G);
    if constexpr (kPack) *d = *reinterpret_cast<const Word<G>*>(s);
    else *reinterpret_cast<Word<G>*>(s) = *d;
  }
}

// The program in device memory: its arrays and the prefix tables, one allocation, copied from
// one host image that the program keeps until discard (the copy is asynchronous). `ready`: an
// event recorded after the copy, which every pack or unpack waits for on its own stream.
struct DeviceProgram {
  ProgramView view;
  void* mem = nullptr;
  char* image = nullptr;
  GPU(Event_t) ready = nullptr;
};

void discard(void* prog) {
  auto* dp = static_cast<DeviceProgram*>(prog);
  if (!dp) return;
  if (dp->ready) {
    (void)GPU(EventSynchronize)(dp->ready);  // the copy reads `image` and writes `mem`
    (void)GPU(EventDestroy)(dp->ready);
  }
  if (dp->mem) (void)GPU(Free)(dp->mem);
  delete[] dp->image;
  delete dp;
}

int upload(const device::BlockProgram* p, void** out, void* stream) {
  // The arrays' sizes: the program stores only pointers, so they are found by walking it.
  int32_t n_items = 0, n_seqs = 0, n_entries = 0;
  for (int32_t s = 0; s < n_seqs + 1; ++s) {  // sequence 0 exists; every group names a later one
    const device::SeqRange& r = p->seqs[s];
    if (r.first + r.n > n_items) n_items = r.first + r.n;
    for (int32_t i = 0; i < r.n; ++i) {
      const device::Item& it = p->items[r.first + i];
      if (it.kind == device::ItemKind::Group && it.ref > n_seqs) n_seqs = it.ref;
      if (it.kind == device::ItemKind::Gather && it.ref + it.nref > n_entries) n_entries = it.ref + it.nref;
    }
  }
  ++n_seqs;
  const device::ProgramTables t = device::program_tables(*p, n_items, n_seqs, n_entries);
  const size_t b_items = sizeof(device::Item) * n_items, b_seqs = sizeof(device::SeqRange) * n_seqs,
               b_entries = sizeof(device::GatherEntry) * n_entries, b_at = sizeof(int64_t) * n_items,
               b_eat = sizeof(int64_t) * n_entries;
  const size_t total = b_items + b_seqs + b_entries + b_at + b_eat + 8;
  auto* dp = new (std::nothrow) DeviceProgram;
  if (!dp) return 2;
  dp->image = new (std::nothrow) char[total];
  int rc = dp->image ? 0 : 2;
  if (rc == 0) rc = GPU(Malloc)(&dp->mem, total);
  if (rc == 0) rc = GPU(EventCreateWithFlags)(&dp->ready, GPU(EventDisableTiming));
  if (rc != 0) {
    discard(dp);
    return rc;
  }
  // Every array is 8-byte aligned (the structs' sizes are multiples of 8), at the same offset in
  // the image and in device memory.
  char* const m = static_cast<char*>(dp->mem);
  size_t at = 0;
  auto put = [&](const void* src, size_t n) {
    if (n) std::memcpy(dp->image + at, src, n);
    char* d = m + at;
    at += n;
    return d;
  };
  dp->view.p = *p;
  dp->view.p.items = reinterpret_cast<const device::Item*>(put(p->items, b_items));
  dp->view.p.seqs = reinterpret_cast<const device::SeqRange*>(put(p->seqs, b_seqs));
  dp->view.p.entries = reinterpret_cast<const device::GatherEntry*>(put(p->entries, b_entries));
  dp->view.p.offsets = nullptr;  // the locate walk reads the entries
  dp->view.item_at = reinterpret_cast<const int64_t*>(put(t.item_at.data(), b_at));
  dp->view.entry_at = reinterpret_cast<const int64_t*>(put(t.entry_at.data(), b_eat));
  dp->view.grain = t.grain;
  const Stream s = static_cast<Stream>(stream);
  rc = GPU(MemcpyAsync)(m, dp->image, at, GPU(MemcpyDefault), s);
  if (rc == 0) rc = GPU(EventRecord)(dp->ready, s);
  if (rc != 0) {
    (void)GPU(StreamSynchronize)(s);  // a copy queued before the record failed still reads the image
    (void)GPU(EventDestroy)(dp->ready);
    dp->ready = nullptr;
    discard(dp);
    return rc;
  }
  *out = dp;
  return 0;
}

template <bool kPack>
int run_pack(const void* prog, void* strided, int64_t count, void* packed, Stream s) {
  const auto* dp = static_cast<const DeviceProgram*>(prog);
  const ProgramView& v = dp->view;
  if (count <= 0 || v.p.size <= 0) return 0;
  // The upload may have been queued on another stream: this one waits for it (on the device).
  if (int rc = GPU(StreamWaitEvent)(s, dp->ready, 0)) return rc;
  // The grain, narrowed to what both pointers' alignment allows.
  int64_t g = v.grain;
  g = device::grain_of(g, static_cast<int64_t>(reinterpret_cast<uintptr_t>(strided) % 16));
  g = device::grain_of(g, static_cast<int64_t>(reinterpret_cast<uintptr_t>(packed) % 16));
  const int64_t bytes = count * v.p.size, chunks = bytes / g;
  char* st = static_cast<char*>(strided);
  char* pk = static_cast<char*>(packed);
  const unsigned grid = blocks_for(chunks);
  switch (g) {
    case 16: return launch(pack_kernel<kPack, 16>, grid, kThreads, s, v, st, pk, chunks);
    case 8: return launch(pack_kernel<kPack, 8>, grid, kThreads, s, v, st, pk, chunks);
    case 4: return launch(pack_kernel<kPack, 4>, grid, kThreads, s, v, st, pk, chunks);
    case 2: return launch(pack_kernel<kPack, 2>, grid, kThreads, s, v, st, pk, chunks);
    default: return launch(pack_kernel<kPack, 1>, grid, kThreads, s, v, st, pk, chunks);
  }
}

int pack(const void* prog, const void* strided, int64_t count, void* packed, void* s) {
  return run_pack<true>(prog, const_cast<void*>(strided), count, packed, static_cast<Stream>(s));
}
int unpack(const void* prog, const void* packed, int64_t count, void* strided, void* s) {
  return run_pack<false>(prog, strided, count, const_cast<void*>(packed), static_cast<Stream>(s));
}

// ---- reductions ------------------------------------------------------------------------------

template <ReduceOp Op, class T>
__global__ void reduce_kernel(const T* in, T* inout, int64_t n) {
  device::reduce_range<Op>(in, inout, first_index(), n, grid_stride());
}

using ReduceLaunch = int (*)(const void*, void*, int64_t, Stream);

template <ReduceOp Op, class T>
int launch_reduce(const void* in, void* inout, int64_t n, Stream s) {
  return launch(reduce_kernel<Op, T>, blocks_for(n), kThreads, s, static_cast<const T*>(in), static_cast<T*>(inout), n);
}
template <ReduceOp Op, class T>
struct LaunchPick {
  static constexpr ReduceLaunch get() { return &launch_reduce<Op, T>; }
};

int reduce(ReduceOp op, ElemType t, const void* in, void* inout, int64_t n, void* s) {
  const ReduceLaunch f = device::ReduceTable<ReduceLaunch, LaunchPick>::find(op, t);
  if (!f) return 1;
  return n > 0 ? f(in, inout, n, static_cast<Stream>(s)) : 0;
}

// ---- quantization ----------------------------------------------------------------------------

// One group of lanes per format block: lane l of the group takes the block's 16-byte chunks l,
// l + G, l + 2G, ... (G = group_lanes(); the vector loads below), or where the block is not
// 16-byte aligned its values l, l + G, ..., so each load or store instruction covers G adjacent
// chunks or values of each group; the block's absmax is a shuffle reduction within the group (xor masks below G stay
// inside it: groups are aligned to G), after which every lane of the group holds the scale and
// its lane 0 writes it. On a GPU the group is the whole warp (wavefront). On the simulated device
// it is 2 of the warp's 8 lanes: each of its shuffles is two barriers over OS threads, and a
// group of 8 (3 shuffles per block) made the quantized suites several times slower; the same code
// then runs groups that are not the whole warp, the GPU's case (G = L) only compiled. The groups
// stride over the blocks by the grid's group count; a block's loop trip count is the same for
// every lane of its warp (every group of a warp runs the same number of blocks: shuffles need the
// whole warp). Every value goes through the same quant/kernels.hpp operations as on the host, so
// the records and values are the same bits.
HIER_DEVICE inline unsigned group_lanes() {
#if defined(HIER_GPU_SIM)
  return 2;
#else
  return lanes();
#endif
}
constexpr unsigned host_group_lanes() {
#if defined(HIER_GPU_SIM)
  return 2;
#else
  return host_lanes();
#endif
}
struct WarpPos {
  int64_t warp, warps;  // this group's index over the grid, and the grid's group count
  int64_t lane, width;  // the lane in its group, and G
};
HIER_DEVICE inline WarpPos warp_pos() {
  const int64_t g = group_lanes(), t = first_index();
  return {t / g, grid_stride() / g, t % g, g};
}
// The largest of the group's m, in every lane of it (m >= 0: the |x| bits of quant::absmax_bits).
template <class U>
HIER_DEVICE inline U warp_max(U m) {
  using R = std::conditional_t<sizeof(U) == 8, long long, int>;  // types every shuffle takes
  R r = static_cast<R>(m);
  for (int o = static_cast<int>(group_lanes()) / 2; o > 0; o /= 2) {
    const R y = shfl_xor(r, o);
    r = y > r ? y : r;
  }
  return static_cast<U>(r);
}
// Grid size for one group per format block (at most kMaxBlocks blocks of kThreads: the groups
// stride over the rest).
unsigned warp_blocks_for(int64_t format_blocks) {
  return blocks_for(format_blocks * static_cast<int64_t>(host_group_lanes()));
}
// Value i of a record's payload p, as an integer (quant/format.hpp).
template <int kBits>
HIER_DEVICE inline int32_t payload_value(const unsigned char* p, int64_t i) {
  if constexpr (kBits == 8) return static_cast<int8_t>(p[i]);
  else return (i & 1) ? quant::nib_hi(p[i / 2]) : quant::nib_lo(p[i / 2]);
}

// Vector loads. Where a block's values start 16-byte aligned, lane l of its group takes the
// kVec<T> adjacent values of chunk l, then chunk l + G, ... (chunk c: values c V .. c V + V - 1),
// each chunk one 16-byte load or store (Vec<T>); the block's last len % V values, and every
// value of a block whose start is not aligned, take the scalar path (value i by lane i % G,
// from the first value no chunk took). A valid block is a multiple of 8 values of 2 to 8 bytes,
// so its byte length is a multiple of 16 and either every block of a buffer starts aligned or
// none does; the check is per block all the same. Each value still goes through the same
// operations and the absmax is a max, which no order changes, so the bits are the host's.
template <class T>
constexpr int kVec = static_cast<int>(16 / sizeof(T));
template <class T>
struct alignas(16) Vec {
  T v[kVec<T>];
};
HIER_DEVICE inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// The whole chunks of a block of len values at xs (every pointer in xs aligned), or 0.
template <class T, class... P>
HIER_DEVICE inline int64_t vec_chunks(int64_t len, const P*... xs) {
  return (aligned16(xs) && ...) ? len / kVec<T> : 0;
}
template <class T>
HIER_DEVICE inline Vec<T> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T>*>(p);
}
template <class T>
HIER_DEVICE inline void store_vec(T* p, const Vec<T>& v) {
  *reinterpret_cast<Vec<T>*>(p) = v;
}
// A chunk's N payload bytes (V for int8, V / 2 for int4) between a record and registers, in
// Word<W> pieces of the widest W <= N that the address allows (a record's payload starts 4 bytes
// past the record, quant::record_offset, so its alignment changes from record to record).
template <int N, int W = N>
HIER_DEVICE inline void store_bytes(unsigned char* d, const Word<N>& q) {
  if constexpr (W > 1) {
    if (reinterpret_cast<uintptr_t>(d) % W != 0) return store_bytes<N, W / 2>(d, q);
  }
  for (int o = 0; o < N; o += W) {
    Word<W> t;
    memcpy(t.b, q.b + o, W);
    *reinterpret_cast<Word<W>*>(d + o) = t;
  }
}
template <int N, int W = N>
HIER_DEVICE inline Word<N> load_bytes(const unsigned char* s) {
  if constexpr (W > 1) {
    if (reinterpret_cast<uintptr_t>(s) % W != 0) return load_bytes<N, W / 2>(s);
  }
  Word<N> q;
  for (int o = 0; o < N; o += W) {
    const Word<W> t = *reinterpret_cast<const Word<W>*>(s + o);
    memcpy(q.b + o, t.b, W);
  }
  return q;
}

template <int kBits, class T>
__global__ void quantize_kernel(const T* x, int64_t n, int64_t b, unsigned char* out, unsigned long long* bad) {
  using F = quant::FloatBits<T>;
  using U = typename F::U;
  using C = typename F::C;
  constexpr int Q = quant::qmax(kBits);
  const WarpPos w = warp_pos();
  // The warp's groups take consecutive blocks, round after round: the loop runs as often for
  // every lane of the warp (a group past the last block takes part in the shuffles with m = 0).
  const int64_t per_warp = static_cast<int64_t>(lanes()) / w.width, in_warp = w.warp % per_warp;
  const int64_t nb = quant::num_blocks(n, b);
  for (int64_t kw = w.warp - in_warp; kw < nb; kw += w.warps) {
    const int64_t k = kw + in_warp;
    const bool live = k < nb;
    const T* xb = x + k * b;
    const int64_t len = live ? quant::block_len(k, n, b) : 0, pb = quant::payload_bytes(len, kBits);
    unsigned char* rec = out + quant::record_offset(k, b, kBits);
    unsigned char* p = rec + 4;
    constexpr int V = kVec<T>;
    const int64_t nc = vec_chunks<T>(len, xb), tail = nc * V;  // nc chunks, then values from tail
    U m = 0;
    auto take = [&](T y) {
      U v;
      memcpy(&v, &y, sizeof(T));
      v &= F::kAbsMask;
      m = v > m ? v : m;
    };
    for (int64_t c = w.lane; c < nc; c += w.width) {
      const Vec<T> xv = load_vec(xb + c * V);
      for (int t = 0; t < V; ++t) take(xv.v[t]);
    }
    for (int64_t i = tail + w.lane; i < len; i += w.width) take(xb[i]);
    m = warp_max(m);
    if (!live) continue;
    const float s = quant::scale_of<kBits, T>(m);
    if (w.lane == 0) {
      quant::store_scale(rec, s);
      if (s != s && bad) atomicAdd(bad, 1ull);  // NaN: the block is sent as NaN
    }
    if (!(s > 0.0f)) {  // all zeros, or NaN: a zero payload
      for (int64_t j = w.lane; j < pb; j += w.width) p[j] = 0;
      continue;
    }
    const C st = static_cast<C>(s);
    const bool div = quant::divides<T>(s);
    const C inv = div ? C(0) : quant::div_rn(C(1), st);
    auto q = [&](T v) {
      const C c = quant::widen(v);
      return div ? quant::round_nearest<Q>(quant::scaled<true>(c, inv, st))
                 : quant::round_nearest<Q>(quant::scaled<false>(c, inv, st));
    };
    if constexpr (kBits == 8) {
      for (int64_t c = w.lane; c < nc; c += w.width) {
        const Vec<T> xv = load_vec(xb + c * V);
        Word<V> o;
        for (int t = 0; t < V; ++t) o.b[t] = static_cast<unsigned char>(q(xv.v[t]));
        store_bytes<V>(p + c * V, o);
      }
      for (int64_t i = tail + w.lane; i < len; i += w.width) p[i] = static_cast<unsigned char>(q(xb[i]));
    } else {  // byte j: values 2j (low nibble) and 2j + 1 (high; 0 past an odd block's end)
      for (int64_t c = w.lane; c < nc; c += w.width) {
        const Vec<T> xv = load_vec(xb + c * V);
        Word<V / 2> o;
        for (int t = 0; t < V / 2; ++t)
          o.b[t] = static_cast<unsigned char>((q(xv.v[2 * t]) & 0xf) | ((q(xv.v[2 * t + 1]) & 0xf) << 4));
        store_bytes<V / 2>(p + c * (V / 2), o);
      }
      for (int64_t j = tail / 2 + w.lane; j < pb; j += w.width) {  // V is even: tail / 2 bytes done
        const int32_t lo = q(xb[2 * j]), hi = 2 * j + 1 < len ? q(xb[2 * j + 1]) : 0;
        p[j] = static_cast<unsigned char>((lo & 0xf) | ((hi & 0xf) << 4));
      }
    }
  }
}

template <int kBits, bool kAdd, class T>
__global__ void dequantize_kernel(const unsigned char* in, int64_t n, int64_t b, T* out) {
  using C = typename quant::FloatBits<T>::C;
  const WarpPos w = warp_pos();
  for (int64_t k = w.warp; k < quant::num_blocks(n, b); k += w.warps) {
    const unsigned char* rec = in + quant::record_offset(k, b, kBits);
    const C s = static_cast<C>(quant::load_scale(rec));
    const int64_t len = quant::block_len(k, n, b);
    T* o = out + k * b;
    auto value = [&](T& y, int32_t qv) {
      const C v = quant::mul_rn(static_cast<C>(qv), s);
      if constexpr (kAdd) y = quant::narrow_to<T>(quant::add_rn(quant::widen(y), v));
      else y = quant::narrow_to<T>(v);
    };
    constexpr int V = kVec<T>, NB = V * kBits / 8;  // a chunk's values and payload bytes
    const int64_t nc = vec_chunks<T>(len, o);
    for (int64_t c = w.lane; c < nc; c += w.width) {
      const Word<NB> q = load_bytes<NB>(rec + 4 + c * NB);
      Vec<T> y;
      if constexpr (kAdd) y = load_vec(o + c * V);
      for (int t = 0; t < V; ++t) value(y.v[t], payload_value<kBits>(q.b, t));
      store_vec(o + c * V, y);
    }
    for (int64_t i = nc * V + w.lane; i < len; i += w.width) value(o[i], payload_value<kBits>(rec + 4, i));
  }
}

// r = x - (the records' value), 0 where not finite (quant::feedback_block, value by value).
template <int kBits, class T>
__global__ void feedback_kernel(const unsigned char* in, const T* x, int64_t n, int64_t b, T* r) {
  using F = quant::FloatBits<T>;
  using C = typename F::C;
  const WarpPos w = warp_pos();
  for (int64_t k = w.warp; k < quant::num_blocks(n, b); k += w.warps) {
    const unsigned char* rec = in + quant::record_offset(k, b, kBits);
    const C s = static_cast<C>(quant::load_scale(rec));
    const int64_t len = quant::block_len(k, n, b);
    const T* xb = x + k * b;
    T* rb = r + k * b;
    auto residual = [&](T xv, int32_t qv) {
      const T deq = quant::narrow_to<T>(quant::mul_rn(static_cast<C>(qv), s));
      T d = quant::narrow_to<T>(quant::add_rn(quant::widen(xv), -quant::widen(deq)));
      typename F::U bits;
      memcpy(&bits, &d, sizeof(T));
      if ((bits & F::kAbsMask) >= F::kExpAll) memset(&d, 0, sizeof(T));  // +0
      return d;
    };
    constexpr int V = kVec<T>, NB = V * kBits / 8;
    const int64_t nc = vec_chunks<T>(len, xb, rb);
    for (int64_t c = w.lane; c < nc; c += w.width) {
      const Word<NB> q = load_bytes<NB>(rec + 4 + c * NB);
      const Vec<T> xv = load_vec(xb + c * V);
      Vec<T> d;
      for (int t = 0; t < V; ++t) d.v[t] = residual(xv.v[t], payload_value<kBits>(q.b, t));
      store_vec(rb + c * V, d);
    }
    for (int64_t i = nc * V + w.lane; i < len; i += w.width) rb[i] = residual(xb[i], payload_value<kBits>(rec + 4, i));
  }
}

template <class T>
__global__ void add_kernel(const T* r, T* x, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) quant::add_values(r + i, x + i, 1);
}

#if HIER_QUANT_F16
// The fused dequantize-reduce of 16-bit values (quant::dequantize_sum_block, value by value): the
// parts summed in float from +0, in part order, rounded to 16 bits once.
template <int kBits>
__global__ void dequantize_sum_kernel(const unsigned char* in, int64_t part_bytes, int parts, int64_t n, int64_t b,
                                      quant::f16* out) {
  const WarpPos w = warp_pos();
  for (int64_t k = w.warp; k < quant::num_blocks(n, b); k += w.warps) {
    const unsigned char* rec = in + quant::record_offset(k, b, kBits);
    const int64_t len = quant::block_len(k, n, b);
    quant::f16* o = out + k * b;
    constexpr int V = kVec<quant::f16>, NB = V * kBits / 8;
    const int64_t nc = vec_chunks<quant::f16>(len, o);
    for (int64_t c = w.lane; c < nc; c += w.width) {
      float acc[V];
      for (int t = 0; t < V; ++t) acc[t] = 0.0f;
      for (int part = 0; part < parts; ++part) {
        const unsigned char* r = rec + part * part_bytes;
        const float s = quant::load_scale(r);
        const Word<NB> q = load_bytes<NB>(r + 4 + c * NB);
        for (int t = 0; t < V; ++t)
          acc[t] = quant::add_rn(acc[t], quant::mul_rn(static_cast<float>(payload_value<kBits>(q.b, t)), s));
      }
      Vec<quant::f16> y;
      for (int t = 0; t < V; ++t) y.v[t] = quant::narrow_to<quant::f16>(acc[t]);
      store_vec(o + c * V, y);
    }
    for (int64_t i = nc * V + w.lane; i < len; i += w.width) {
      float acc = 0.0f;
      for (int part = 0; part < parts; ++part) {
        const unsigned char* r = rec + part * part_bytes;
        acc = quant::add_rn(acc, quant::mul_rn(static_cast<float>(payload_value<kBits>(r + 4, i)), quant::load_scale(r)));
      }
      o[i] = quant::narrow_to<quant::f16>(acc);
    }
  }
}
#endif

// The one switch over the values' types: f(T*) with a null pointer of t's type; 1 (an error,
// nothing queued) for a type this module has no kernels for (F16 without a 16-bit float).
template <class F>
int by_type(device::QuantType t, F&& f) {
  switch (t) {
    case device::QuantType::F32: return f(static_cast<float*>(nullptr));
    case device::QuantType::F64: return f(static_cast<double*>(nullptr));
    case device::QuantType::F16:
#if HIER_QUANT_F16
      return f(static_cast<quant::f16*>(nullptr));
#else
      return 1;
#endif
  }
  return 1;
}

// No lock and no synchronize: the bad blocks are counted into the caller's counter (device
// memory of s's device, or null), which the caller reads after its own next synchronization.
template <class T>
int quantize_t(int bits, const void* x, int64_t n, int64_t b, void* out, unsigned long long* bad, Stream s) {
  const unsigned grid = warp_blocks_for(quant::num_blocks(n, b));
  const T* xt = static_cast<const T*>(x);
  auto* o = static_cast<unsigned char*>(out);
  return bits == 8 ? launch(quantize_kernel<8, T>, grid, kThreads, s, xt, n, b, o, bad)
                   : launch(quantize_kernel<4, T>, grid, kThreads, s, xt, n, b, o, bad);
}

int quantize(int bits, device::QuantType t, const void* x, int64_t n, int64_t b, void* out, unsigned long long* bad,
             void* s) {
  if (!quant::valid_bits(bits) || !quant::valid_block(b) || n < 0) return 1;
  if (n == 0) return 0;
  return by_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return quantize_t<T>(bits, x, n, b, out, bad, static_cast<Stream>(s));
  });
}

template <class T>
int dequantize_t(int bits, const void* in, int64_t n, int64_t b, void* out, bool add, Stream s) {
  const auto* i = static_cast<const unsigned char*>(in);
  T* o = static_cast<T*>(out);
  const unsigned grid = warp_blocks_for(quant::num_blocks(n, b));
  if constexpr (sizeof(T) == 2) {  // 16-bit values are never summed in 16 bits: dequantize_sum
    if (add) return 1;
    return bits == 8 ? launch(dequantize_kernel<8, false, T>, grid, kThreads, s, i, n, b, o)
                     : launch(dequantize_kernel<4, false, T>, grid, kThreads, s, i, n, b, o);
  } else {
    if (bits == 8)
      return add ? launch(dequantize_kernel<8, true, T>, grid, kThreads, s, i, n, b, o)
                 : launch(dequantize_kernel<8, false, T>, grid, kThreads, s, i, n, b, o);
    return add ? launch(dequantize_kernel<4, true, T>, grid, kThreads, s, i, n, b, o)
               : launch(dequantize_kernel<4, false, T>, grid, kThreads, s, i, n, b, o);
  }
}

int dequantize(int bits, device::QuantType t, const void* in, int64_t n, int64_t b, void* out, int add, void* s) {
  if (!quant::valid_bits(bits) || !quant::valid_block(b) || n < 0) return 1;
  if (n == 0) return 0;
  return by_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return dequantize_t<T>(bits, in, n, b, out, add != 0, static_cast<Stream>(s));
  });
}

int dequantize_sum(int bits, device::QuantType t, const void* in, int64_t part_bytes, int parts, int64_t n, int64_t b,
                   void* out, void* s) {
  if (!quant::valid_bits(bits) || !quant::valid_block(b) || n < 0 || parts < 1 || t != device::QuantType::F16) return 1;
  if (n == 0) return 0;
#if HIER_QUANT_F16
  const auto* i = static_cast<const unsigned char*>(in);
  auto* o = static_cast<quant::f16*>(out);
  const unsigned grid = warp_blocks_for(quant::num_blocks(n, b));
  const Stream st = static_cast<Stream>(s);
  return bits == 8 ? launch(dequantize_sum_kernel<8>, grid, kThreads, st, i, part_bytes, parts, n, b, o)
                   : launch(dequantize_sum_kernel<4>, grid, kThreads, st, i, part_bytes, parts, n, b, o);
#else
  (void)in, (void)part_bytes, (void)out, (void)s;
  return 1;
#endif
}

int feedback(int bits, device::QuantType t, const void* in, const void* x, int64_t n, int64_t b, void* r, void* s) {
  if (!quant::valid_bits(bits) || !quant::valid_block(b) || n < 0) return 1;
  if (n == 0) return 0;
  return by_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto* i = static_cast<const unsigned char*>(in);
    const T* xt = static_cast<const T*>(x);
    T* rt = static_cast<T*>(r);
    const unsigned grid = warp_blocks_for(quant::num_blocks(n, b));
    const Stream st = static_cast<Stream>(s);
    return bits == 8 ? launch(feedback_kernel<8, T>, grid, kThreads, st, i, xt, n, b, rt)
                     : launch(feedback_kernel<4, T>, grid, kThreads, st, i, xt, n, b, rt);
  });
}

int quant_add(device::QuantType t, const void* r, void* x, int64_t n, void* s) {
  if (n < 0) return 1;
  if (n == 0) return 0;
  return by_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return launch(add_kernel<T>, blocks_for(n), kThreads, static_cast<Stream>(s), static_cast<const T*>(r),
                  static_cast<T*>(x), n);
  });
}

// ---- memory and streams ----------------------------------------------------------------------

int alloc(void** p, size_t n) { return static_cast<int>(GPU(Malloc)(p, n ? n : 1)); }
int release(void* p) { return static_cast<int>(GPU(Free)(p)); }
int host_alloc(void** p, size_t n) { return static_cast<int>(host_malloc(p, n ? n : 1)); }
int host_release(void* p) { return static_cast<int>(host_free(p)); }
int stream_create(void** s) {
  Stream st = nullptr;
  const int rc = static_cast<int>(GPU(StreamCreateWithFlags)(&st, GPU(StreamNonBlocking)));
  *s = st;
  return rc;
}
int stream_destroy(void* s) { return static_cast<int>(GPU(StreamDestroy)(static_cast<Stream>(s))); }
int sync(void* s) { return static_cast<int>(GPU(StreamSynchronize)(static_cast<Stream>(s))); }
int copy(void* dst, const void* src, size_t n, void* s) {
  return n ? static_cast<int>(GPU(MemcpyAsync)(dst, src, n, GPU(MemcpyDefault), static_cast<Stream>(s))) : 0;
}
int fill(void* p, int value, size_t n, void* s) {
  return n ? static_cast<int>(GPU(MemsetAsync)(p, value, n, static_cast<Stream>(s))) : 0;
}
using Event = GPU(Event_t);
int event_create(void** e) {
  Event ev = nullptr;
  const int rc = static_cast<int>(GPU(EventCreateWithFlags)(&ev, GPU(EventDisableTiming)));
  *e = ev;
  return rc;
}
int event_destroy(void* e) { return e ? static_cast<int>(GPU(EventDestroy)(static_cast<Event>(e))) : 0; }
int event_record(void* e, void* s) { return static_cast<int>(GPU(EventRecord)(static_cast<Event>(e), static_cast<Stream>(s))); }
int event_wait(void* e) { return static_cast<int>(GPU(EventSynchronize)(static_cast<Event>(e))); }

int get_device(int* d) { return static_cast<int>(GPU(GetDevice)(d)); }
int set_device(int d) { return static_cast<int>(GPU(SetDevice)(d)); }
int pointer_device(const void* p, int* d) { return pointer_device_of(p, d); }

#if defined(HIER_GPU_SIM)
constexpr const char* kName = "sim";
#elif defined(__HIPCC__)
constexpr const char* kName = "hip";
#else
constexpr const char* kName = "cuda";
#endif

const device::ModuleTable kTable{device::kModuleAbi, kName, alloc, release, stream_create, stream_destroy, sync,
                                 copy, upload, discard, pack, unpack, reduce, quantize, dequantize, feedback,
                                 host_alloc, host_release, quant_add, dequantize_sum, fill, event_create,
                                 event_destroy, event_record, event_wait, get_device, set_device,
                                 pointer_device};

}  // namespace
}  // namespace hier::gpu

extern "C" __attribute__((visibility("default"))) const hier::device::ModuleTable* hier_device_module(uint32_t abi) {
#if defined(HIER_GPU_SIM)
  if (!hier::gpu::sim::usable()) return nullptr;  // no simulated device in this process
#endif
  return abi == hier::device::kModuleAbi ? &hier::gpu::kTable : nullptr;
}
