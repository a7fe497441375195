// Loading the GPU backend module (device/module.hpp): once, on the first call that wants a
// kernel, and only when the program has a GPU runtime loaded (device::runtime()).
#include "device/module.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "device/pointer.hpp"

namespace hier::device {
namespace {

std::mutex g_mu;
const ModuleTable* g_module = nullptr;
void* g_stream = nullptr;
bool g_tried = false;

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
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_tried) return g_module;
  g_tried = true;
  const std::string s = setting ? setting : "auto";
  if (s == "off") return nullptr;
  const bool explicit_path = s != "auto";
  const std::string path = explicit_path ? s : own_dir() + (r == Runtime::Cuda ? "/libhier-cuda.so" : "/libhier-hip.so");
  const ModuleTable* t = open_module(path, explicit_path);
  if (t && t->stream_create(&g_stream) != 0) g_stream = nullptr;  // the default stream then
  g_module = t;
  return t;
}

void* module_stream() { return g_stream; }

}  // namespace hier::device
