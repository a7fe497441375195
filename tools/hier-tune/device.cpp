// hier-tune's device rates (the tune file's "device" section, model/device_rates.hpp): the GPU
// module's copies, float32 sum and quantization kernels, timed through libhier's own loader
// where this process has a GPU runtime and the module (HIER_GPU_MODULE) loads. Each kernel or
// copy is queued on the module's stream and waited for; a per-byte rate is the slope between
// `bytes` / 4 and `bytes` (so that the launch and the wait are not counted as bytes), step_ns
// the time of a 4-byte copy queued and waited for.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "config/config.hpp"
#include "device/module.hpp"
#include "device/pointer.hpp"
#include "measure.hpp"
#include "quant/quant.hpp"

namespace hier::tune {

namespace {

using device::ModuleTable;

// Module memory released with the measurement.
struct Mem {
  const ModuleTable* m;
  void* p = nullptr;
  bool pinned;
  Mem(const ModuleTable* mod, size_t n, bool host) : m(mod), pinned(host) {
    if ((host ? m->host_alloc(&p, n) : m->alloc(&p, n)) != 0) p = nullptr;
  }
  ~Mem() {
    if (p) pinned ? m->host_release(p) : m->release(p);
  }
  Mem(const Mem&) = delete;
  Mem& operator=(const Mem&) = delete;
};

}  // namespace

bool measure_device(bool quick, int64_t quant_block, model::DeviceRates& r) {
  if (device::runtime() == device::Runtime::None) return false;
  const ModuleTable* mod = device::module(config::get().gpu_module.c_str());
  if (!mod) return false;
  void* s = device::module_stream();
  const int64_t bytes = quick ? (1 << 20) : (16 << 20);
  Mem a(mod, bytes, false), b(mod, bytes, false), rec(mod, bytes, false), h(mod, bytes, true);
  if (!a.p || !b.p || !rec.p || !h.p) return false;
  // Gradient-like values (hier-tune's host quantization figures use the same): finite, varied.
  std::vector<float> x(static_cast<size_t>(bytes / 4));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * (1 + (i / 512) % 13));
  bool ok = mod->copy(a.p, x.data(), static_cast<size_t>(bytes), s) == 0 && mod->sync(s) == 0 &&
            mod->copy(b.p, x.data(), static_cast<size_t>(bytes), s) == 0 && mod->sync(s) == 0;
  // fn(n) queues work on n bytes; each timing waits for it.
  auto time_of = [&](int64_t n, const std::function<int(int64_t)>& fn) {
    return seconds([&] { ok &= fn(n) == 0 && mod->sync(s) == 0; });
  };
  auto per_byte = [&](const std::function<int(int64_t)>& fn) {
    const double big = time_of(bytes, fn), small = time_of(bytes / 4, fn);
    return std::max(0.0, 1e9 * (big - small) / (0.75 * static_cast<double>(bytes)));
  };
  r.step_ns = 1e9 * time_of(4, [&](int64_t n) { return mod->copy(b.p, a.p, static_cast<size_t>(n), s); });
  r.copy_ns_per_byte = per_byte([&](int64_t n) { return mod->copy(b.p, a.p, static_cast<size_t>(n), s); });
  r.h2d_ns_per_byte = per_byte([&](int64_t n) { return mod->copy(a.p, h.p, static_cast<size_t>(n), s); });
  r.d2h_ns_per_byte = per_byte([&](int64_t n) { return mod->copy(h.p, a.p, static_cast<size_t>(n), s); });
  r.reduce_ns_per_byte = per_byte([&](int64_t n) {
    return mod->reduce(device::ReduceOp::Sum, device::ElemType::F32, a.p, b.p, n / 4, s);
  });
  for (int bits : {8, 4}) {
    model::DeviceQuantRates& q = r.q(bits);
    q.quantize_ns_per_byte = per_byte([&](int64_t n) {
      return mod->quantize(bits, device::QuantType::F32, a.p, n / 4, quant_block, rec.p, nullptr, s);
    });
    q.dequantize_ns_per_byte = per_byte([&](int64_t n) {
      return mod->dequantize(bits, device::QuantType::F32, rec.p, n / 4, quant_block, b.p, 0, s);
    });
    q.dequantize_add_ns_per_byte = per_byte([&](int64_t n) {
      return mod->dequantize(bits, device::QuantType::F32, rec.p, n / 4, quant_block, b.p, 1, s);
    });
  }
  if (!ok) return false;
  r.measured = true;
  r.module = mod->name;
  r.device = std::string(mod->name) == "sim" ? "simulated device" : "";
  return true;
}

}  // namespace hier::tune
