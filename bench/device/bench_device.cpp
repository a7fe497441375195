// Device rates of the GPU module (issue 25's GPU check): per size, device-to-device copies, copies
// between pinned host memory and the device, the float32 sum, quantize / dequantize / fused
// dequantize + add (int8, int4); per layout of bench/pack (bench/pack/layouts.hpp, one table),
// the pack and unpack kernels against a device-to-device copy of the same packed bytes, and per size
// the same for a vector of 64-byte blocks (the rows bench/device/targets.hpp's targets judge). Every
// kernel's result is first checked against the host bodies (the host backend, src/quant), byte
// for byte; a mismatch fails the run (exit 1).
//   bench_device --module PATH [--runtime LIB] [--quick] [--filter TEXT] [--json FILE]
// --module: the GPU module (libhier-cuda.so, libhier-sim.so), loaded through libhier's own
//   loader (device::module), the table libhier.so uses;
// --runtime: the GPU runtime to load first (default libcuda.so.1; libhier asks only a runtime
//   already loaded), for the simulated device tests/device's stand-in libcuda.so.1.
// Timings: each figure is the best of 5 batches of calls queued on the module's stream, every
// batch ended by a stream synchronize, so only completed work is counted. On the simulated device
// (module "sim") they mean nothing: its streams wait 200 us before every operation on purpose.
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "../pack/layouts.hpp"
#include "targets.hpp"
#include "device/backend.hpp"
#include "device/module.hpp"
#include "device/pointer.hpp"
#include "dtype/canon.hpp"
#include "dtype/device_pack.hpp"
#include "dtype/engine.hpp"
#include "quant/quant.hpp"

namespace {

using hier::device::ModuleTable;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

const ModuleTable* g_mod = nullptr;
void* g_stream = nullptr;
bool g_quick = false, g_sim = false;
std::string g_filter;
int g_failures = 0;

// The targets on a GPU (targets.hpp), as fractions of the device-to-device copy of the same bytes;
// bench/pack's layouts are marked against the pack target where their blocks are this long.
using hier::bench::kPackTarget;
using hier::bench::kQuantTarget;
constexpr int64_t kPackTargetFromBlock = hier::bench::kPackBlockBytes;

void fail(const std::string& what) {
  std::fprintf(stderr, "bench_device: MISMATCH %s\n", what.c_str());
  ++g_failures;
}

bool ok(int rc, const char* what) {
  if (rc != 0) fail(std::string(what) + " returned " + std::to_string(rc));
  return rc == 0;
}

// Seconds per call of `enqueue` (work queued on the module's stream): calls are batched until a
// batch lasts min_batch, then the best of 5 batches is kept; each batch ends with a stream
// synchronize, so the time is that of completed work.
double per_call(const std::function<int()>& enqueue) {
  const double min_batch = g_sim ? 0.0 : g_quick ? 0.002 : 0.01;
  auto batch = [&](int reps) {
    const auto t0 = Clock::now();
    int rc = 0;
    for (int i = 0; i < reps && rc == 0; ++i) rc = enqueue();
    if (rc == 0) rc = g_mod->sync(g_stream);
    if (rc != 0) return -1.0;
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  if (batch(1) < 0) return -1;  // warm-up (first touch, lazy module loading)
  int reps = 1;
  while (reps < (1 << 20)) {
    const double t = batch(reps);
    if (t < 0) return -1;
    if (t >= min_batch) break;
    reps *= 2;
  }
  double best = 1e30;
  for (int k = 0; k < (g_sim ? 1 : 5); ++k) {
    const double t = batch(reps);
    if (t < 0) return -1;
    best = std::min(best, t / reps);
  }
  return best;
}

double gbs(double bytes, double s) { return s > 0 ? bytes / s / 1e9 : 0.0; }

// Device memory of the module, released with it.
struct DevBuf {
  void* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t bytes) : n(bytes) {
    if (g_mod->alloc(&p, bytes ? bytes : 1) != 0) {
      std::fprintf(stderr, "bench_device: cannot allocate %zu bytes of device memory\n", bytes);
      std::exit(2);
    }
  }
  ~DevBuf() { g_mod->release(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  char* c() const { return static_cast<char*>(p); }
  void put(const void* src, size_t bytes) {
    ok(g_mod->copy(p, src, bytes, g_stream), "copy to device");
    ok(g_mod->sync(g_stream), "sync");
  }
  template <class T>
  std::vector<T> get(size_t count) const {
    std::vector<T> v(count);
    ok(g_mod->copy(v.data(), p, count * sizeof(T), g_stream), "copy to host");
    ok(g_mod->sync(g_stream), "sync");
    return v;
  }
};

// Page-locked host memory of the module (the staging areas' kind).
struct PinnedBuf {
  void* p = nullptr;
  explicit PinnedBuf(size_t bytes) {
    if (g_mod->host_alloc(&p, bytes ? bytes : 1) != 0) {
      std::fprintf(stderr, "bench_device: cannot allocate %zu bytes of pinned host memory\n", bytes);
      std::exit(2);
    }
  }
  ~PinnedBuf() { g_mod->host_release(p); }
  PinnedBuf(const PinnedBuf&) = delete;
  PinnedBuf& operator=(const PinnedBuf&) = delete;
};

double d2d_seconds(const DevBuf& dst, const DevBuf& src, size_t bytes) {
  return per_call([&] { return g_mod->copy(dst.p, src.p, bytes, g_stream); });
}

std::string size_text(double b) {
  char s[32];
  if (b >= (1 << 20)) std::snprintf(s, sizeof s, "%g MiB", b / (1 << 20));
  else std::snprintf(s, sizeof s, "%g KiB", b / 1024);
  return s;
}

// ---- copies and the float32 sum, per size ----------------------------------------------------

json bench_sizes(const std::vector<int64_t>& sizes) {
  json rows = json::array();
  std::printf("\n## Copies and the float32 sum (GB/s of the bytes moved once; ratio: / device-to-device copy)\n\n");
  std::printf("| bytes | d2d copy | host->device (pinned) | device->host (pinned) | sum f32 | sum / d2d |\n");
  std::printf("|---|---|---|---|---|---|\n");
  std::mt19937 rng(5);
  for (int64_t bytes : sizes) {
    const size_t n = static_cast<size_t>(bytes);
    DevBuf a(n), b(n);
    PinnedBuf h(n);
    const double d2d = d2d_seconds(b, a, n);
    const double h2d = per_call([&] { return g_mod->copy(a.p, h.p, n, g_stream); });
    const double d2h = per_call([&] { return g_mod->copy(h.p, a.p, n, g_stream); });
    // The sum, checked once on fresh values against the host backend.
    const int64_t count = bytes / 4;
    std::vector<float> in(count), io(count);
    std::uniform_real_distribution<float> d(-1, 1);
    for (float& x : in) x = d(rng);
    for (float& x : io) x = d(rng);
    a.put(in.data(), n);
    b.put(io.data(), n);
    using hier::device::ElemType;
    using hier::device::ReduceOp;
    ok(g_mod->reduce(ReduceOp::Sum, ElemType::F32, a.p, b.p, count, g_stream), "reduce");
    hier::device::host().reduce(ReduceOp::Sum, ElemType::F32, in.data(), io.data(), count);
    if (b.get<float>(count) != io) fail("sum f32 of " + std::to_string(count) + " values");
    const double sum = per_call([&] { return g_mod->reduce(ReduceOp::Sum, ElemType::F32, a.p, b.p, count, g_stream); });
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.2f |\n", size_text(double(bytes)).c_str(), gbs(bytes, d2d),
                gbs(bytes, h2d), gbs(bytes, d2h), gbs(bytes, sum), d2d / sum);
    rows.push_back({{"bytes", bytes}, {"d2d_s", d2d}, {"h2d_s", h2d}, {"d2h_s", d2h}, {"reduce_sum_f32_s", sum}});
  }
  return rows;
}

// ---- quantization, per size and format -------------------------------------------------------

json bench_quant(const std::vector<int64_t>& sizes, int64_t block) {
  json rows = json::array();
  std::printf("\n## Quantization, block %lld (GB/s of float32 values; ratio: / d2d copy of the float bytes; target >= %.1fx)\n\n",
              static_cast<long long>(block), kQuantTarget);
  std::printf("| format | float bytes | quantize | dequantize | dequantize + add | quantize / d2d | dequantize + add / d2d |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::mt19937 rng(9);
  for (int bits : {8, 4})
    for (int64_t bytes : sizes) {
      const int64_t n = bytes / 4;
      const size_t rb = static_cast<size_t>(hier::quant::quantized_bytes(n, block, bits));
      std::vector<float> x(static_cast<size_t>(n));
      std::normal_distribution<float> d(0, 3);
      for (float& v : x) v = d(rng);
      DevBuf dx(static_cast<size_t>(bytes)), drec(rb), dout(static_cast<size_t>(bytes)), dcopy(static_cast<size_t>(bytes));
      dx.put(x.data(), static_cast<size_t>(bytes));
      using hier::device::QuantType;
      // Checked against the host bodies: records, the bad-block count, dequantize, dequantize + add.
      std::vector<char> want(rb);
      const int64_t want_bad = hier::quant::quantize(x.data(), n, block, bits, want.data());
      // The bad-block count: a counter in device memory that the kernel adds to.
      DevBuf dbad(sizeof(unsigned long long));
      const unsigned long long zero = 0;
      dbad.put(&zero, sizeof zero);
      ok(g_mod->quantize(bits, QuantType::F32, dx.p, n, block, drec.p, static_cast<unsigned long long*>(dbad.p), g_stream),
         "quantize");
      const std::string what = "int" + std::to_string(bits) + " n " + std::to_string(n);
      const auto bad = dbad.get<unsigned long long>(1);
      if (static_cast<int64_t>(bad[0]) != want_bad || drec.get<char>(rb) != want) fail("quantize " + what);
      std::vector<float> out(static_cast<size_t>(n));
      hier::quant::dequantize(want.data(), n, block, bits, out.data());
      ok(g_mod->dequantize(bits, QuantType::F32, drec.p, n, block, dout.p, 0, g_stream), "dequantize");
      if (dout.get<float>(n) != out) fail("dequantize " + what);
      hier::quant::dequantize_add(want.data(), n, block, bits, out.data());
      ok(g_mod->dequantize(bits, QuantType::F32, drec.p, n, block, dout.p, 1, g_stream), "dequantize + add");
      if (dout.get<float>(n) != out) fail("dequantize + add " + what);

      const double q = per_call([&] {
        return g_mod->quantize(bits, QuantType::F32, dx.p, n, block, drec.p, nullptr, g_stream);
      });
      const double dq = per_call([&] { return g_mod->dequantize(bits, QuantType::F32, drec.p, n, block, dout.p, 0, g_stream); });
      const double da = per_call([&] { return g_mod->dequantize(bits, QuantType::F32, drec.p, n, block, dout.p, 1, g_stream); });
      const double d2d = d2d_seconds(dcopy, dx, static_cast<size_t>(bytes));
      std::printf("| int%d | %s | %.1f | %.1f | %.1f | %.2f | %.2f |\n", bits, size_text(double(bytes)).c_str(), gbs(bytes, q),
                  gbs(bytes, dq), gbs(bytes, da), d2d / q, d2d / da);
      rows.push_back({{"bits", bits}, {"block", block}, {"bytes", bytes}, {"quantize_s", q}, {"dequantize_s", dq},
                      {"dequantize_add_s", da}, {"d2d_s", d2d}});
    }
  return rows;
}

// ---- pack and unpack of bench/pack's layouts -------------------------------------------------

json g_pack_rows = json::array(), g_pack_size_rows = json::array();

// n random bytes, 8 at a time (a face's span is the whole 128 MiB grid).
std::vector<char> random_bytes(size_t n, std::mt19937_64& rng) {
  std::vector<char> v(n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t w = rng();
    std::memcpy(v.data() + i, &w, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<char>(rng());
  return v;
}

void bench_layout(const hier::bench::PackLayout& l, json& rows) {
  MPI_Datatype t = l.type;
  if (!g_filter.empty() && l.name.find(g_filter) == std::string::npos) {
    MPI_Type_free(&t);
    return;
  }
  MPI_Type_commit(&t);
  hier::dtype::CanonRef canon(hier::dtype::canonicalize(t));
  MPI_Count lb, ext, tlb, text;
  MPI_Type_get_extent_x(t, &lb, &ext);
  MPI_Type_get_true_extent_x(t, &tlb, &text);
  MPI_Type_free(&t);
  if (!canon->ok) {
    std::printf("| %s | no exact form: not run on the device | | | | | | | |\n", l.name.c_str());
    return;
  }
  hier::dtype::Canon& c = *canon.get();
  const int64_t count = l.count, bytes = c.size * count;
  const int64_t e_last = (count - 1) * ext;
  const int64_t lo = std::min<int64_t>(tlb, tlb + e_last), hi = std::max<int64_t>(tlb + text, tlb + e_last + text);
  const int64_t span = hi - lo, origin = -lo;  // element 0's origin in the device buffer
  if (span > (int64_t{1} << 30)) {  // the WRF struct's arrays lie wherever the heap put them
    std::printf("| %s | span %s: not run | | | | | | | |\n", l.name.c_str(), size_text(double(span)).c_str());
    return;
  }
  if (!hier::dtype::device_ready(*g_mod, c)) {
    fail("upload of " + l.name);
    return;
  }
  const void* prog = c.device_prog[hier::device::current_device()].load();
  // Device data: a random pattern over the layout's whole span (only its packed bytes matter).
  std::mt19937_64 rng(17);
  std::vector<char> host = random_bytes(static_cast<size_t>(span), rng);
  DevBuf strided(static_cast<size_t>(span)), packed(static_cast<size_t>(bytes)), copy(static_cast<size_t>(bytes));
  strided.put(host.data(), host.size());
  // Checks first: the kernels' bytes against the host engine's (dtype::pack / unpack).
  ok(g_mod->pack(prog, strided.c() + origin, count, packed.p, g_stream), "pack");
  std::vector<char> want(static_cast<size_t>(bytes));
  hier::dtype::pack(c, host.data() + origin, count, want.data());
  if (packed.get<char>(static_cast<size_t>(bytes)) != want) fail("pack " + l.name);
  // Unpack a packed stream of another pattern: the engine's own pack of it, so that a typemap
  // that names a byte twice (the atom gather's repeated indices) gets the same value each time
  // and the result does not depend on the order of the writes.
  const std::vector<char> other = random_bytes(host.size(), rng);
  std::vector<char> in(static_cast<size_t>(bytes));
  hier::dtype::pack(c, other.data() + origin, count, in.data());
  packed.put(in.data(), in.size());
  ok(g_mod->unpack(prog, packed.p, count, strided.c() + origin, g_stream), "unpack");
  hier::dtype::unpack(c, in.data(), count, host.data() + origin);
  if (strided.get<char>(host.size()) != host) fail("unpack " + l.name);

  const double pk = per_call([&] { return g_mod->pack(prog, strided.c() + origin, count, packed.p, g_stream); });
  const double up = per_call([&] { return g_mod->unpack(prog, packed.p, count, strided.c() + origin, g_stream); });
  const double d2d = d2d_seconds(copy, packed, static_cast<size_t>(bytes));
  const int64_t block = c.blocks > 0 ? c.size / c.blocks : c.size;  // mean bytes per contiguous run
  const bool targeted = block >= kPackTargetFromBlock;
  auto verdict = [&](double s) {
    if (g_sim || !targeted) return "";
    return d2d / s >= kPackTarget ? " (met)" : " (below)";
  };
  std::printf("| %s | %lld | %lld | %.1f | %.1f | %.1f | %.2f%s | %.2f%s |\n", l.name.c_str(), static_cast<long long>(bytes / 1024),
              static_cast<long long>(block), gbs(bytes, d2d), gbs(bytes, pk), gbs(bytes, up), d2d / pk, verdict(pk), d2d / up,
              verdict(up));
  std::fflush(stdout);
  rows.push_back({{"layout", l.name}, {"bytes", bytes}, {"block_bytes", block}, {"blocks", c.blocks * count},
                         {"pack_s", pk}, {"unpack_s", up}, {"d2d_s", d2d}, {"targeted", targeted}});
}

// The device's name through the CUDA driver the runtime loaded (nothing for another runtime).
std::string device_name(void* runtime) {
  if (g_sim) return "simulated device (tests/device)";
  using Init = int (*)(unsigned);
  using Name = int (*)(char*, int, int);
  auto init = reinterpret_cast<Init>(dlsym(runtime, "cuInit"));
  auto name = reinterpret_cast<Name>(dlsym(runtime, "cuDeviceGetName"));
  char s[256] = {};
  if (init && name && init(0) == 0 && name(s, sizeof s, 0) == 0) return s;
  return std::string("unknown (") + g_mod->name + ")";
}

int usage(const char* why) {
  std::fprintf(stderr, "bench_device: %s\nusage: bench_device --module PATH [--runtime LIB] [--quick] [--filter TEXT] [--json FILE]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string module, runtime = "libcuda.so.1", json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--quick") g_quick = true;
    else if (a == "--module" && has) module = argv[++i];
    else if (a == "--runtime" && has) runtime = argv[++i];
    else if (a == "--filter" && has) g_filter = argv[++i];
    else if (a == "--json" && has) json_path = argv[++i];
    else return usage(("unknown argument '" + a + "'").c_str());
  }
  if (module.empty()) return usage("--module is required");
  MPI_Init(&argc, &argv);  // the layouts are MPI datatypes (one process, no launcher needed)
  // libhier asks only a runtime the program loaded (device/pointer.hpp): load it as a program would.
  void* rt = dlopen(runtime.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!rt) {
    std::fprintf(stderr, "bench_device: --runtime %s cannot be loaded (%s)\n", runtime.c_str(), dlerror());
    return 2;
  }
  g_mod = hier::device::module(module.c_str());  // libhier's loader: says why in one line if it cannot
  if (!g_mod) {
    std::fprintf(stderr, "bench_device: no GPU module from --module %s (runtime found: %s)\n", module.c_str(),
                 hier::device::to_string(hier::device::runtime()));
    return 2;
  }
  g_stream = hier::device::module_stream();
  g_sim = std::string(g_mod->name) == "sim";
  const std::string dev = device_name(rt);
  std::printf("# bench_device: module %s (%s), device: %s\n", g_mod->name, module.c_str(), dev.c_str());
  if (g_sim)
    std::printf("\nSIMULATED DEVICE: the timings below mean nothing (its streams wait 200 us before every operation);"
                " this run only checks the kernels against the host bodies.\n");
  const std::vector<int64_t> sizes = g_sim     ? std::vector<int64_t>{64 << 10, 1 << 20}
                                     : g_quick ? std::vector<int64_t>{64 << 10, 1 << 20, 16 << 20}
                                               : std::vector<int64_t>{64 << 10, 1 << 20, 16 << 20, 256 << 20};
  json doc;
  doc["module"] = g_mod->name;
  doc["module_path"] = module;
  doc["device"] = dev;
  doc["simulated"] = g_sim;
  doc["sizes"] = bench_sizes(sizes);
  json quant = json::array();
  for (int64_t block : {int64_t{512}, int64_t{64}})
    for (auto& r : bench_quant(sizes, block)) quant.push_back(r);
  doc["quant"] = quant;
  std::printf("\n## Pack and unpack of bench/pack's layouts (GB/s of packed bytes; ratio: / d2d copy of the packed bytes;"
              " target >= %.1fx for blocks of %lld B and more)\n\n",
              kPackTarget, static_cast<long long>(kPackTargetFromBlock));
  std::printf("| layout | KiB | bytes per block | d2d copy | pack | unpack | pack / d2d | unpack / d2d |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  hier::bench::for_each_pack_layout([](const hier::bench::PackLayout& l) { bench_layout(l, g_pack_rows); });
  doc["pack"] = g_pack_rows;
  // Per size: float blocks of 64 bytes every 128 bytes, `bytes` packed (the judged rows).
  std::printf("\n## Pack and unpack per size: float blocks of %lld B every %lld B (target >= %.1fx at 16 and 256 MiB)\n\n",
              static_cast<long long>(kPackTargetFromBlock), static_cast<long long>(2 * kPackTargetFromBlock), kPackTarget);
  std::printf("| layout | KiB | bytes per block | d2d copy | pack | unpack | pack / d2d | unpack / d2d |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  const int floats = static_cast<int>(kPackTargetFromBlock / 4);
  for (int64_t bytes : sizes) {
    hier::bench::PackLayout l;
    l.name = "vector " + size_text(double(bytes));
    MPI_Type_vector(static_cast<int>(bytes / kPackTargetFromBlock), floats, 2 * floats, MPI_FLOAT, &l.type);
    l.count = 1;
    l.base = nullptr;
    bench_layout(l, g_pack_size_rows);
  }
  doc["pack_sizes"] = g_pack_size_rows;
  doc["failures"] = g_failures;
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << doc.dump(1) << "\n";
    if (!f) std::fprintf(stderr, "bench_device: cannot write %s\n", json_path.c_str());
  }
  std::printf("\n%s: %d mismatches against the host bodies\n", g_failures ? "FAILED" : "checked", g_failures);
  MPI_Finalize();
  return g_failures ? 1 : 0;
}
