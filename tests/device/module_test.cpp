// The GPU backend module's kernels against the host backend, byte for byte: pack and unpack of
// random derived datatypes (tests/dtype/typegen), every reduction MPI defines, quantize and
// dequantize. Everything goes through the module's own table (alloc, copy, sync), so the same
// test runs against any module: the simulated device's (libhier-sim.so, here; its memory faults
// on any host access, its streams are worker threads) or a real GPU's (HIER_TEST_MODULE=path of
// libhier-cuda.so on a machine with one).
//   HIER_TEST_MODULE  the module (default: the simulated one of this build)
//   HIER_TEST_NTYPES  random datatypes (default 1500), HIER_TEST_SEED their seed
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference.hpp"
#include "typegen.hpp"
#include "device/backend.hpp"
#include "device/module.hpp"
#include "dtype/canon.hpp"
#include "dtype/engine.hpp"
#include "quant/quant.hpp"

namespace hier::test {
namespace {

using device::ModuleTable;

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : dflt;
}

const ModuleTable* load() {
  const char* path = std::getenv("HIER_TEST_MODULE");
  if (!path || !*path) path = HIER_SIM_MODULE;
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    ADD_FAILURE() << "dlopen " << path << ": " << dlerror();
    return nullptr;
  }
  auto entry = reinterpret_cast<device::ModuleEntry>(dlsym(h, device::kModuleEntry));
  if (!entry) {
    ADD_FAILURE() << path << " has no " << device::kModuleEntry;
    return nullptr;
  }
  EXPECT_EQ(entry(device::kModuleAbi + 1), nullptr) << "a module must refuse another ABI";
  return entry(device::kModuleAbi);
}

const ModuleTable& mod() {
  static const ModuleTable* m = load();
  if (!m) throw std::runtime_error("no module");
  return *m;
}

// A buffer in device memory, filled from and read back to host vectors through the module.
struct DeviceBuffer {
  void* p = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t bytes) : n(bytes) { EXPECT_EQ(mod().alloc(&p, bytes ? bytes : 1), 0); }
  ~DeviceBuffer() { mod().release(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* at(int64_t off) const { return static_cast<char*>(p) + off; }
  void put(const std::vector<char>& v) {
    ASSERT_EQ(mod().copy(p, v.data(), v.size(), nullptr), 0);
    ASSERT_EQ(mod().sync(nullptr), 0);
  }
  std::vector<char> get() const {
    std::vector<char> v(n);
    EXPECT_EQ(mod().copy(v.data(), p, n, nullptr), 0);
    EXPECT_EQ(mod().sync(nullptr), 0);
    return v;
  }
};

// `bytes` placed `off` bytes into a device allocation whose other bytes (and 16 past the end)
// hold a pattern: get() returns the placed bytes and fails the test if a kernel wrote outside
// them (a vector store past a block's or a record's end).
struct Placed {
  static constexpr char kPattern = static_cast<char>(0xa5);
  DeviceBuffer buf;
  int64_t off;
  size_t n;
  Placed(size_t bytes, int64_t off) : buf(static_cast<size_t>(off) + bytes + 16), off(off), n(bytes) {
    buf.put(std::vector<char>(buf.n, kPattern));
  }
  void* p() const { return buf.at(off); }
  void put(const std::vector<char>& v) {
    std::vector<char> all(buf.n, kPattern);
    std::copy(v.begin(), v.end(), all.begin() + off);
    buf.put(all);
  }
  std::vector<char> get() const {
    std::vector<char> all = buf.get();
    const auto first = all.begin() + off, last = first + static_cast<int64_t>(n);
    EXPECT_TRUE(std::all_of(all.begin(), first, [](char c) { return c == kPattern; }) &&
                std::all_of(last, all.end(), [](char c) { return c == kPattern; }))
        << "a kernel wrote outside its " << n << " bytes at offset " << off;
    return std::vector<char>(first, last);
  }
};

// Where check_quant places its buffers, counted from a 16-byte aligned start: the inputs (x, and
// y of x += r) `x` values in, the outputs (out and r) `out` values in, the records (and
// dequantize_sum's parts) `rec` bytes in. The kernels load and store 16 bytes at a time only where
// a block's values start 16-byte aligned (the scalar path elsewhere), and a record's payload as
// wide as its address allows.
struct Place {
  int64_t x = 0, out = 0, rec = 0;
};

template <class V>
std::vector<char> bytes_of(const V& v) {
  std::vector<char> b(v.size() * sizeof(v[0]));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// One type, `count` elements: the module's pack and unpack against the host backend's.
void check_type(MPI_Datatype t, int count, const std::string& desc, std::mt19937_64& rng, void* stream, int& checked) {
  MPI_Count size, lb, ext, tlb, text;
  PMPI_Type_size_x(t, &size);
  PMPI_Type_get_extent_x(t, &lb, &ext);
  PMPI_Type_get_true_extent_x(t, &tlb, &text);
  if (size == 0) return;
  dtype::CanonRef c(dtype::canonicalize(t));
  if (!c->ok) return;
  const int64_t e_last = (count - 1) * ext;
  const int64_t lo = std::min<int64_t>(tlb, tlb + e_last), hi = std::max<int64_t>(tlb + text, tlb + e_last + text);
  const int64_t pad = 16, need = count * size;
  std::vector<char> src(static_cast<size_t>(hi - lo + 2 * pad));
  for (char& x : src) x = static_cast<char>(rng());
  const int64_t origin = pad - lo;  // element 0's origin in the buffer

  void* prog = nullptr;
  ASSERT_EQ(mod().upload(&c->view, &prog, stream), 0) << desc;
  DeviceBuffer strided(src.size()), packed(static_cast<size_t>(need));
  strided.put(src);
  packed.put(std::vector<char>(static_cast<size_t>(need), 0x5a));
  ASSERT_EQ(mod().pack(prog, strided.at(origin), count, packed.p, stream), 0);
  ASSERT_EQ(mod().sync(stream), 0);
  std::vector<char> want(static_cast<size_t>(need));
  dtype::pack(*c, src.data() + origin, count, want.data());
  EXPECT_EQ(packed.get(), want) << "pack differs: " << desc << " count " << count;

  // Unpack into a fresh background; overlapping typemaps (erroneous to receive into) only pack.
  std::vector<uint8_t> cover(static_cast<size_t>(hi - lo), 0);
  bool overlap = false;
  walk(c->view, count, [&](int64_t o, int64_t len) {
    for (int64_t k = 0; k < len; ++k) overlap |= cover[o - lo + k]++ != 0;
  });
  if (!overlap) {
    std::vector<char> background(src.size()), in(static_cast<size_t>(need));
    for (char& x : background) x = static_cast<char>(rng());
    for (char& x : in) x = static_cast<char>(rng());
    packed.put(in);
    strided.put(background);
    ASSERT_EQ(mod().unpack(prog, packed.p, count, strided.at(origin), stream), 0);
    ASSERT_EQ(mod().sync(stream), 0);
    dtype::unpack(*c, in.data(), count, background.data() + origin);
    EXPECT_EQ(strided.get(), background) << "unpack differs: " << desc << " count " << count;
  }
  mod().discard(prog);
  ++checked;
}

TEST(Module, PackUnpackRandomTypes) {
  void* stream = nullptr;
  ASSERT_EQ(mod().stream_create(&stream), 0);
  const int64_t n = env_int("HIER_TEST_NTYPES", 1500);
  TypeGen gen(static_cast<uint64_t>(env_int("HIER_TEST_SEED", 20261127)), GenOptions{3, 4096, 64 * 1024, true});
  std::mt19937_64 rng(7);
  const int counts[] = {1, 2, 3, 7};
  int checked = 0;
  for (int64_t i = 0; i < n && !HasFailure(); ++i) {
    std::string desc;
    MPI_Datatype t = gen.next(desc);
    check_type(t, counts[i % 4], desc, rng, i % 2 ? stream : nullptr, checked);
    free_type(t);
  }
  EXPECT_GT(checked, n / 2) << "too few representable types were checked";
  mod().stream_destroy(stream);
}

// Every (op, type) pair: defined pairs as the host computes them, the others refused.
TEST(Module, Reductions) {
  std::mt19937_64 rng(11);
  const size_t kSizes[] = {
#define HIER_REDUCE_TYPE(e, type, kind, mpi) sizeof(type),
#include "device/reduce_types.def"
  };
  for (int op = 0; op < static_cast<int>(device::ReduceOp::Count); ++op)
    for (int t = 0; t < static_cast<int>(device::ElemType::Count); ++t)
      for (int64_t n : {0, 1, 7, 4099}) {
        const auto o = static_cast<device::ReduceOp>(op);
        const auto et = static_cast<device::ElemType>(t);
        const size_t bytes = static_cast<size_t>(n) * kSizes[t];
        std::vector<char> in(bytes), io(bytes);
        for (char& x : in) x = static_cast<char>(rng() % 7);  // small values: also valid bools
        for (char& x : io) x = static_cast<char>(rng() % 7);
        if (et == device::ElemType::Bool) {
          for (char& x : in) x &= 1;
          for (char& x : io) x &= 1;
        }
        DeviceBuffer din(bytes), dio(bytes);
        din.put(in);
        dio.put(io);
        const bool defined = device::host().reduce(o, et, in.data(), io.data(), n);
        const int rc = mod().reduce(o, et, din.p, dio.p, n, nullptr);
        ASSERT_EQ(rc == 0, defined) << "op " << op << " type " << t;
        ASSERT_EQ(mod().sync(nullptr), 0);
        if (defined) {
          EXPECT_EQ(dio.get(), io) << "op " << op << " type " << t << " n " << n;
        }
      }
}

template <class T>
void check_quant(device::QuantType qt, int bits, int64_t n, int64_t block, std::mt19937_64& rng, Place at = {}) {
  const int64_t xo = at.x * static_cast<int64_t>(sizeof(T)), oo = at.out * static_cast<int64_t>(sizeof(T));
  const std::string where = " (bits " + std::to_string(bits) + " n " + std::to_string(n) + " block " +
                            std::to_string(block) + " size " + std::to_string(sizeof(T)) + " at x+" +
                            std::to_string(at.x) + " out+" + std::to_string(at.out) + " rec+" + std::to_string(at.rec) + ")";
  std::vector<T> x(static_cast<size_t>(n));
  std::normal_distribution<double> d(0.0, 3.0);
  for (T& v : x) v = static_cast<T>(d(rng));
  if (n > 100) x[50] = static_cast<T>(NAN);  // one block that cannot be quantized
  const size_t rb = static_cast<size_t>(quant::quantized_bytes(n, block, bits));
  std::vector<char> want(rb);
  const int64_t want_bad = quant::quantize(x.data(), n, block, bits, want.data());
  Placed dx(x.size() * sizeof(T), xo), drec(rb, at.rec);
  dx.put(bytes_of(x));
  // The bad blocks are added to a counter in device memory (no synchronize inside the call):
  // queued twice, the count doubles.
  DeviceBuffer dbad(sizeof(unsigned long long));
  dbad.put(std::vector<char>(sizeof(unsigned long long), 0));
  auto* bad = static_cast<unsigned long long*>(dbad.p);
  ASSERT_EQ(mod().quantize(bits, qt, dx.p(), n, block, drec.p(), bad, nullptr), 0);
  ASSERT_EQ(mod().quantize(bits, qt, dx.p(), n, block, drec.p(), bad, nullptr), 0);
  unsigned long long got_bad = 0;
  std::memcpy(&got_bad, dbad.get().data(), sizeof got_bad);
  EXPECT_EQ(static_cast<int64_t>(got_bad), 2 * want_bad) << where;
  EXPECT_EQ(drec.get(), want) << "records differ" << where;
  // Dequantize, then dequantize-add onto it: the host's bits both times.
  std::vector<T> out(static_cast<size_t>(n));
  quant::dequantize(want.data(), n, block, bits, out.data());
  Placed dout(out.size() * sizeof(T), oo);
  ASSERT_EQ(mod().dequantize(bits, qt, drec.p(), n, block, dout.p(), 0, nullptr), 0);
  ASSERT_EQ(mod().sync(nullptr), 0);
  EXPECT_EQ(dout.get(), bytes_of(out)) << "values differ" << where;
  if constexpr (sizeof(T) == 2) {
    // 16-bit values are never summed in 16 bits: dequantize-add is refused; the fused
    // dequantize-reduce sums 3 parts (these records, and two of their own) in float.
    if (n > 0) {
      EXPECT_NE(mod().dequantize(bits, qt, drec.p(), n, block, dout.p(), 1, nullptr), 0);
    }
    const int64_t part = static_cast<int64_t>(rb) + 8;  // a stride that is not the records' size
    std::vector<char> parts(static_cast<size_t>(3 * part), 0);
    for (int k = 0; k < 3; ++k) {
      std::vector<T> y(x.size());
      for (T& v : y) v = static_cast<T>(d(rng));
      if (k == 0) std::memcpy(parts.data(), want.data(), rb);
      else quant::quantize(y.data(), n, block, bits, parts.data() + k * part);
    }
    quant::dequantize_sum(parts.data(), part, 3, n, block, bits, out.data());
    Placed dparts(parts.size(), at.rec);
    dparts.put(parts);
    ASSERT_EQ(mod().dequantize_sum(bits, qt, dparts.p(), part, 3, n, block, dout.p(), nullptr), 0);
    ASSERT_EQ(mod().sync(nullptr), 0);
    EXPECT_EQ(dout.get(), bytes_of(out)) << "16-bit sums differ" << where;
  } else {
    quant::dequantize_add(want.data(), n, block, bits, out.data());
    ASSERT_EQ(mod().dequantize(bits, qt, drec.p(), n, block, dout.p(), 1, nullptr), 0);
    ASSERT_EQ(mod().sync(nullptr), 0);
    EXPECT_EQ(dout.get(), bytes_of(out)) << "sums differ" << where;
    EXPECT_NE(mod().dequantize_sum(bits, qt, drec.p(), 0, 1, n, block, dout.p(), nullptr), 0) << "F16 only";
  }
  // The error feedback's x += r: x + r in the compute type, rounded once (the host executor's
  // x[i] = x[i] + r[i]).
  {
    std::vector<T> y(x.size()), sum(x.size());
    for (T& v : y) v = static_cast<T>(d(rng) * 0.01);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = x[i] + y[i];
    Placed dy(y.size() * sizeof(T), xo), dsum(x.size() * sizeof(T), oo);
    dy.put(bytes_of(y));
    dsum.put(bytes_of(x));
    ASSERT_EQ(mod().quant_add(qt, dy.p(), dsum.p(), n, nullptr), 0);
    ASSERT_EQ(mod().sync(nullptr), 0);
    EXPECT_EQ(dsum.get(), bytes_of(sum)) << "x += r differs" << where;
  }
  // Error feedback: the residual x - deq(q(x)), non-finite differences dropped, as the host
  // executor computes it (exec/executor.cpp's Quantize step).
  std::vector<T> r(static_cast<size_t>(n));
  quant::dequantize(want.data(), n, block, bits, r.data());
  for (size_t i = 0; i < r.size(); ++i) {
    r[i] = x[i] - r[i];
    if (!std::isfinite(static_cast<double>(r[i]))) r[i] = T(0);
  }
  Placed dr(r.size() * sizeof(T), oo);
  ASSERT_EQ(mod().feedback(bits, qt, drec.p(), dx.p(), n, block, dr.p(), nullptr), 0);
  ASSERT_EQ(mod().sync(nullptr), 0);
  EXPECT_EQ(dr.get(), bytes_of(r)) << "residuals differ" << where;
}

TEST(Module, Quantization) {
  std::mt19937_64 rng(13);
  for (int bits : {8, 4})
    for (int64_t n : {0, 1, 7, 4099, 65537})
      for (int64_t block : {64, 512}) {
        check_quant<float>(device::QuantType::F32, bits, n, block, rng);
        check_quant<double>(device::QuantType::F64, bits, n, block, rng);
#if HIER_QUANT_F16
        check_quant<quant::f16>(device::QuantType::F16, bits, n, block, rng);
#endif
      }
  EXPECT_NE(mod().quantize(3, device::QuantType::F32, nullptr, 8, 64, nullptr, nullptr, nullptr), 0) << "bits 3 refused";
  EXPECT_NE(mod().feedback(3, device::QuantType::F32, nullptr, nullptr, 8, 64, nullptr, nullptr), 0) << "bits 3 refused";
}

// The vector and scalar paths of the quantization kernels, and the payload stores of every
// width: buffers 16-byte aligned (the vector path: 4 floats, 2 doubles or 8 16-bit values per
// lane and load, the scalar path for the last len % that values of a block) or one value off
// (scalar), x and the outputs placed apart (feedback takes the vector path only when both are
// aligned), records 0 to 7 bytes off (their payloads start at every alignment), odd lengths and
// the smallest blocks. Every valid block (a multiple of 8 values) is a multiple of 16 bytes
// long, so a block of another byte length cannot be asked for.
TEST(Module, QuantizationVectorPaths) {
  std::mt19937_64 rng(17);
  const Place places[] = {{0, 0, 0}, {1, 1, 0}, {0, 0, 1}, {0, 0, 2}, {0, 0, 6}, {1, 0, 3}, {0, 1, 4}, {3, 5, 7}, {8, 2, 5}};
  const int64_t shapes[][2] = {{512, 512}, {1031, 512}, {2 * 512 + 5, 512}, {8, 8}, {13, 8},
                               {101, 24}, {1043, 520}, {3, 16}, {70, 64}};
  for (int bits : {8, 4})
    for (const auto& sh : shapes)
      for (const Place& at : places) {
        check_quant<float>(device::QuantType::F32, bits, sh[0], sh[1], rng, at);
        check_quant<double>(device::QuantType::F64, bits, sh[0], sh[1], rng, at);
#if HIER_QUANT_F16
        check_quant<quant::f16>(device::QuantType::F16, bits, sh[0], sh[1], rng, at);
#endif
        if (HasFailure()) return;
      }
}

// memset, and events: a wait for an event returns once the work queued before its record is
// done (the staged message steps wait for their own copies in: exec/device_stage.hpp).
TEST(Module, MemsetAndEvents) {
  void* stream = nullptr;
  ASSERT_EQ(mod().stream_create(&stream), 0);
  for (size_t n : {size_t{1}, size_t{4099}, size_t{1} << 20}) {
    DeviceBuffer b(n);
    b.put(std::vector<char>(n, 0x5a));
    ASSERT_EQ(mod().memset(b.p, 0, n, stream), 0);
    std::vector<char> back(n, 1);
    void* e = nullptr;
    ASSERT_EQ(mod().event_create(&e), 0);
    ASSERT_EQ(mod().copy(back.data(), b.p, n, stream), 0);
    ASSERT_EQ(mod().event_record(e, stream), 0);
    ASSERT_EQ(mod().event_wait(e), 0);
    EXPECT_EQ(back, std::vector<char>(n, 0)) << "memset of " << n << " bytes, read after the event";
    // A second record of the same event: the wait is for the latest one.
    std::vector<char> fill(n, 0x33), again(n, 0);
    ASSERT_EQ(mod().copy(b.p, fill.data(), n, stream), 0);
    ASSERT_EQ(mod().copy(again.data(), b.p, n, stream), 0);
    ASSERT_EQ(mod().event_record(e, stream), 0);
    ASSERT_EQ(mod().event_wait(e), 0);
    EXPECT_EQ(again, fill);
    ASSERT_EQ(mod().event_destroy(e), 0);
  }
  ASSERT_EQ(mod().stream_destroy(stream), 0);
}

}  // namespace
}  // namespace hier::test
