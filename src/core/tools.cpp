#include "core/tools.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/hooks.hpp"
#include "diag/log.hpp"

namespace hier::core {

void* g_real[static_cast<int>(Fn::Count)];
void* g_tool[static_cast<int>(Fn::Count)];
void* g_fwd[static_cast<int>(Fn::Count)];
constinit thread_local Pending tl_pending __attribute__((tls_model("initial-exec"))) = {0, nullptr};

namespace {
constexpr int kFns = static_cast<int>(Fn::Count);
std::atomic<uint64_t> g_went_around{0};

const void* object_of(const void* p, const char** name = nullptr) {
  Dl_info info{};
  if (!p || !dladdr(p, &info)) return nullptr;
  if (name) *name = info.dli_fname && *info.dli_fname ? info.dli_fname : "the program";
  return info.dli_fbase;
}

const void* self_object() {
  static const void* self = object_of(reinterpret_cast<const void*>(&resolve_real));
  return self;
}

// Whether `fn`, a definition of MPI_<f>, is an MPI library's own: that library's PMPI_<f> is the
// same function (Open MPI and MPICH define MPI_<f> as a weak alias of PMPI_<f>). A tool's
// MPI_<f> is not, also where the tool intercepts PMPI_<f> too; a tool that intercepts only
// PMPI_<f> is g_real and sees libhier's calls there.
bool mpis_own(void* fn, const std::string& name) {
  Dl_info info{};
  if (!dladdr(fn, &info) || !info.dli_fname) return false;
  void* h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return false;
  const bool own = dlsym(h, ("P" + name).c_str()) == fn;
  dlclose(h);
  return own;
}

void resolve_all() {
  for (int i = 0; i < kFns; ++i) {
    const std::string name = kFnNames[i];
    void* real = dlsym(RTLD_NEXT, ("P" + name).c_str());
    if (!real) continue;  // not in this MPI (a large-count variant of an MPI-3 library): never called
    void* next = dlsym(RTLD_NEXT, name.c_str());
    g_tool[i] = next && next != real && !mpis_own(next, name) ? next : nullptr;
    void* first = dlsym(RTLD_DEFAULT, ("P" + name).c_str());
    __atomic_store_n(&g_fwd[i], first && object_of(first) != self_object() ? first : real, __ATOMIC_RELEASE);
    __atomic_store_n(&g_real[i], real, __ATOMIC_RELEASE);
  }
}

// Quiet (no MPI, no output): the tables are final before the program's first MPI call.
__attribute__((constructor)) void resolve_at_load() { resolve_all(); }

std::string list_names(const std::vector<std::string>& fns) {
  std::string s;
  for (size_t i = 0; i < fns.size() && i < 3; ++i) s += (i ? ", " : "") + fns[i];
  if (fns.size() > 3) s += " and " + std::to_string(fns.size() - 3) + " more";
  return s;
}

std::string base_name(const std::string& path) {
  const size_t k = path.rfind('/');
  return k == std::string::npos ? path : path.substr(k + 1);
}
}  // namespace

void* resolve_real(Fn f) {
  static std::once_flag once;
  std::call_once(once, resolve_all);
  void* p = __atomic_load_n(&g_real[static_cast<int>(f)], __ATOMIC_ACQUIRE);
  if (!p) {
    std::fprintf(stderr, "libhier: FATAL: no P%s after libhier.so: the program runs on another MPI than this libhier.so was built for\n",
                 kFnNames[static_cast<int>(f)]);
    _exit(1);
  }
  return p;
}

void tool_went_around(Fn f) {
  if (g_went_around.fetch_add(1, std::memory_order_relaxed) == 0 && base::g_runtime.world_rank <= 0) {
    const char* lib = "a tool";
    object_of(g_tool[static_cast<int>(f)], &lib);
    log::write(config::LogLevel::Warn, "tools", __FILE__, __LINE__,
               "%s's %s called the MPI's P%s directly (by a pointer of its own), not through libhier.so: that call "
               "ran without libhier's schedule (counted in the report's \"tools\" section)",
               lib, kFnNames[static_cast<int>(f)], kFnNames[static_cast<int>(f)]);
  }
}

void check_tool_order(int rank) {
  const void* self = self_object();
  std::map<std::string, std::vector<std::string>> before, after;  // library -> functions
  for (int i = 0; i < kFns; ++i) {
    if (!g_real[i]) continue;
    const char* lib = nullptr;
    const void* first = object_of(dlsym(RTLD_DEFAULT, kFnNames[i]), &lib);
    if (first && first != self) before[lib].push_back(kFnNames[i]);
    const char* next = nullptr;
    if (object_of(g_tool[i], &next)) after[next].push_back(kFnNames[i]);
  }
  if (before.empty() && after.empty()) return;
  if (rank <= 0) {
    for (const auto& [lib, fns] : before) {
      const std::string b = base_name(lib);
      log::write(config::LogLevel::Warn, "tools", __FILE__, __LINE__,
                 "%s is loaded before libhier.so and defines %s: the program's calls of %s go from it straight to "
                 "the MPI, without libhier (nothing hierarchical, not in libhier's report). Preload libhier.so first, "
                 "LD_PRELOAD=\"libhier.so %s\" or hier-run --with-tool %s: libhier then passes every call on to %s",
                 lib.c_str(), list_names(fns).c_str(), fns.size() == 1 ? "it" : "these", lib.c_str(), lib.c_str(), b.c_str());
    }
    for (const auto& [lib, fns] : after)
      HIER_INFO("tools", "%s comes after libhier.so: %zu MPI functions (%s) are passed on to it, libhier's version of "
                "each call running under it", lib.c_str(), fns.size(), list_names(fns).c_str());
  }
  auto section = [before, after]() {
    nlohmann::json j;
    auto put = [&j](const char* key, const std::map<std::string, std::vector<std::string>>& m) {
      j[key] = nlohmann::json::array();
      for (const auto& [lib, fns] : m) j[key].push_back({{"library", lib}, {"functions", fns}});
    };
    put("before_libhier", before);
    put("after_libhier", after);
    j["went_around"] = g_went_around.load();
    return j.dump();
  };
  static std::once_flag registered;
  std::call_once(registered, [&] { base::add_report_section("tools", section); });
}

}  // namespace hier::core
