// The calling thread's Python file:line (diag/python_site.hpp).
#include "diag/python_site.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string_view>

namespace hier::diag::python {

namespace {

using namespace py311;

struct Api {
  void* (*this_thread_state)() = nullptr;     // PyGILState_GetThisThreadState: no GIL needed
  int (*finalizing)() = nullptr;              // _Py_IsFinalizing: a read of one global
  int (*addr2line)(void*, int) = nullptr;     // PyCode_Addr2Line: reads the line table only
  const void* code_type = nullptr;            // &PyCode_Type
  const void* str_type = nullptr;             // &PyUnicode_Type
};

// Found at the first call from a Python binding (Python is in the process by then).
const Api* api() noexcept {
  static const Api* a = []() -> const Api* {
    static Api x;
    const auto* version = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));
    if (!version || (*version >> 16) != 0x030B) return nullptr;  // 3.11 only: its layout
    if (dlsym(RTLD_DEFAULT, "_Py_RefTotal")) return nullptr;     // a debug build: other layouts
    x.this_thread_state = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
    x.finalizing = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "_Py_IsFinalizing"));
    x.addr2line = reinterpret_cast<int (*)(void*, int)>(dlsym(RTLD_DEFAULT, "PyCode_Addr2Line"));
    x.code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    x.str_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    if (!x.this_thread_state || !x.finalizing || !x.addr2line || !x.code_type || !x.str_type) return nullptr;
    return &x;
  }();
  return a;
}

template <typename T>
T at(const void* base, size_t off) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + off, sizeof v);
  return v;
}

// A str's UTF-8 bytes without the GIL: a compact ASCII str's own bytes, or a compact str's
// cached UTF-8 form where Python made one; else none.
bool str_bytes(const Api& a, const void* s, const char** p, size_t* n) {
  if (!s || at<const void*>(s, kObType) != a.str_type) return false;
  const auto state = at<uint32_t>(s, kStrState);
  const bool compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact) return false;
  if (ascii) {
    *p = static_cast<const char*>(s) + kStrAsciiData;
    *n = static_cast<size_t>(at<int64_t>(s, kStrLength));
    return true;
  }
  *p = at<const char*>(s, kStrUtf8);
  *n = static_cast<size_t>(at<int64_t>(s, kStrUtf8Length));
  return *p != nullptr;
}

constexpr int kSites = 512;  // interned Python sites (a power of two)

struct Site {
  std::atomic<const void*> code{nullptr};  // nullptr: free
  std::atomic<int> lasti{0};
  std::atomic<bool> ready{false};
  char file_line[112] = {};
  char function[80] = {};
};
Site g_sites[kSites];
std::mutex g_insert_mu;

uint64_t slot_of(const void* code, int lasti) {
  const uint64_t k = reinterpret_cast<uintptr_t>(code) ^ (static_cast<uint64_t>(static_cast<uint32_t>(lasti)) << 40);
  return (k * 0x9E3779B97F4A7C15ull) >> 55;  // 9 bits: kSites
}

void copy_text(char* dst, size_t cap, const char* p, size_t n) {
  n = n < cap - 1 ? n : cap - 1;
  std::memcpy(dst, p, n);
  dst[n] = 0;
}

bool is(const Site& s, const void* code, int lasti) {
  return s.code.load(std::memory_order_relaxed) == code && s.lasti.load(std::memory_order_relaxed) == lasti;
}

const Site* intern(const Api& a, const void* code, int lasti, const char* file, size_t nfile) noexcept {
  constexpr int kProbe = 16;
  const uint64_t h = slot_of(code, lasti);
  for (int i = 0; i < kProbe; ++i) {  // lock-free: records are filled once, then only read
    const Site& s = g_sites[(h + static_cast<uint64_t>(i)) & (kSites - 1)];
    if (!s.ready.load(std::memory_order_acquire)) break;
    if (is(s, code, lasti)) return &s;
  }
  std::lock_guard<std::mutex> lk(g_insert_mu);
  for (int i = 0; i < kProbe; ++i) {
    Site& s = g_sites[(h + static_cast<uint64_t>(i)) & (kSites - 1)];
    if (s.ready.load(std::memory_order_acquire)) {
      if (is(s, code, lasti)) return &s;
      continue;
    }
    // A free record: its text is made once, here.
    const auto* slash = static_cast<const char*>(memrchr(file, '/', nfile));
    const char* base = slash ? slash + 1 : file;
    const int nbase = static_cast<int>(nfile - static_cast<size_t>(base - file));
    const int line = a.addr2line(const_cast<void*>(code), lasti < 0 ? -1 : lasti * 2);
    std::snprintf(s.file_line, sizeof s.file_line, "%.*s:%d", nbase > 96 ? 96 : nbase, base, line);
    const char* fn = nullptr;
    size_t nfn = 0;
    if (str_bytes(a, at<const void*>(code, kCodeQualname), &fn, &nfn)) copy_text(s.function, sizeof s.function, fn, nfn);
    else copy_text(s.function, sizeof s.function, "?", 1);
    s.code.store(code, std::memory_order_relaxed);
    s.lasti.store(lasti, std::memory_order_relaxed);
    s.ready.store(true, std::memory_order_release);
    return &s;
  }
  return nullptr;  // the records near this slot are all taken
}

}  // namespace

const void* current_site() noexcept {
  const Api* a = api();
  // While Python finalizes, it frees the thread states of threads still inside a call.
  if (!a || a->finalizing()) return nullptr;
  const void* ts = a->this_thread_state();
  if (!ts) return nullptr;
  const void* cf = at<const void*>(ts, kTstateCframe);
  const void* f = cf ? at<const void*>(cf, kCframeCurrent) : nullptr;
  for (int depth = 0; f && depth < 32; ++depth, f = at<const void*>(f, kFramePrevious)) {
    const void* code = at<const void*>(f, kFrameCode);
    if (!code || at<const void*>(code, kObType) != a->code_type) return nullptr;
    const auto* first = static_cast<const char*>(code) + kCodeAdaptive;
    const auto* instr = at<const char*>(f, kFramePrevInstr);
    if (at<char>(f, kFrameOwner) != kOwnedByGenerator && instr < first + 2 * at<int>(code, kCodeFirstTraceable))
      continue;  // an incomplete frame (being set up): not a call site yet
    const char* file = nullptr;
    size_t nfile = 0;
    if (!str_bytes(*a, at<const void*>(code, kCodeFilename), &file, &nfile)) return nullptr;
    static constexpr char kMpi4py[] = "/mpi4py/";
    if (std::string_view(file, nfile).find(kMpi4py) != std::string_view::npos) continue;  // mpi4py's own Python
    return intern(*a, code, static_cast<int>((instr - first) / 2), file, nfile);
  }
  return nullptr;
}

bool describe(const void* site, const char** file_line, const char** function) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(site), lo = reinterpret_cast<uintptr_t>(&g_sites[0]);
  if (a < lo || a >= lo + sizeof g_sites || (a - lo) % sizeof(Site) != 0) return false;
  const auto* s = static_cast<const Site*>(site);
  if (!s->ready.load(std::memory_order_acquire)) return false;
  *file_line = s->file_line;
  *function = s->function;
  return true;
}

}  // namespace hier::diag::python
