// Loading the GPU backend module (device/module.hpp): once, on the first call that wants a
// kernel, and only when the program has a GPU runtime loaded (device::runtime()).
#include "device/module.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "device/pointer.hpp"

namespace hier::device {
namespace {

std::mutex g_mu;
std::atomic<const ModuleTable*> g_module{nullptr};  // set once, under g_mu
bool g_tried = false;
// The module's streams, one per device ordinal, each made at its first use (under g_mu).
struct DeviceStream {
  std::atomic<bool> made{false};
  void* stream = nullptr;
};
DeviceStream g_streams[kMaxDevices];

// libhier.so's own directory (the modules are installed beside it), from one of its symbols.
std::string own_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&module), &info) || !info.dli_fname) return {};
  std::string p = info.dli_fname;
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? std::string(".") : p.substr(0, slash);
}

const ModuleTable* open_module(const std::string& path, bool explicit_path) {
  // RTLD_LOCAL: the module's symbols (its static CUDA runtime) stay out of the program's way.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  const ModuleTable* t = nullptr;
  const char* why = nullptr;
  if (!h) {
    why = dlerror();
  } else if (auto entry = reinterpret_cast<ModuleEntry>(dlsym(h, kModuleEntry)); !entry) {
    why = "no hier_device_module symbol";
  } else if (!(t = entry(kModuleAbi))) {
    why = "built for another libhier version, or its runtime is not usable here";
  }
  if (!t) {
    // A module asked for by path that does not load is a setup error worth one line; the
    // default lookup failing only means this install has no module for the runtime.
    if (explicit_path)
      std::fprintf(stderr, "libhier: HIER_GPU_MODULE=%s could not be used (%s); device buffers are staged through host memory\n",
                   path.c_str(), why ? why : "unknown");
    if (h) dlclose(h);
  }
  return t;
}

}  // namespace

const ModuleTable* module(const char* setting) {
  const Runtime r = runtime();
  if (r == Runtime::None) return nullptr;
  if (const ModuleTable* t = g_module.load(std::memory_order_acquire)) return t;  // loaded: no lock
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_tried) return g_module.load(std::memory_order_relaxed);
  g_tried = true;
  const std::string s = setting ? setting : "auto";
  if (s == "off") return nullptr;
  const bool explicit_path = s != "auto";
  const std::string path = explicit_path ? s : own_dir() + (r == Runtime::Cuda ? "/libhier-cuda.so" : "/libhier-hip.so");
  const ModuleTable* t = open_module(path, explicit_path);
  g_module.store(t, std::memory_order_release);
  return t;
}

int current_device() {
  const ModuleTable* m = g_module.load(std::memory_order_acquire);
  int d = 0;
  if (m && m->get_device(&d) != 0) d = 0;
  return d;
}

int device_of(const void* p) {
  const ModuleTable* m = g_module.load(std::memory_order_acquire);
  int d = -1;
  if (!m || m->pointer_device(p, &d) != 0) return -1;
  return d;
}

void* module_stream() {
  const ModuleTable* m = g_module.load(std::memory_order_acquire);
  if (!m) return nullptr;
  const int d = current_device();
  if (d < 0 || d >= kMaxDevices) return nullptr;
  DeviceStream& ds = g_streams[d];
  if (ds.made.load(std::memory_order_acquire)) return ds.stream;
  std::lock_guard<std::mutex> lk(g_mu);
  if (!ds.made.load(std::memory_order_relaxed)) {
    if (m->stream_create(&ds.stream) != 0) ds.stream = nullptr;  // the default stream then
    ds.made.store(true, std::memory_order_release);
  }
  return ds.stream;
}

DeviceScope::DeviceScope(int d) {
  const ModuleTable* m = g_module.load(std::memory_order_acquire);
  int cur = -1;
  if (d < 0 || !m || m->get_device(&cur) != 0 || cur == d) return;
  if (m->set_device(d) == 0) restore_ = cur;
}

DeviceScope::~DeviceScope() {
  if (restore_ >= 0) g_module.load(std::memory_order_acquire)->set_device(restore_);
}

}  // namespace hier::device
