// The call site of an MPI call (diag/call_site.hpp): the kind of each return address, cached;
// the libunwind walk past the libraries between the program and libhier; Python's own frames.
#include "diag/call_site.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "diag/python_site.hpp"

namespace hier::diag {

namespace {

enum Kind : uintptr_t {
  kProgram = 1,  // the program's code (or code in no known object: nothing better to name)
  kPassThrough = 2,  // libhier, the MPI and its Fortran bindings, Horovod, libc, ...: walk on
  kPython = 3,   // the Python interpreter or a Python binding of MPI: the Python frame names it
};

bool starts_with(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

// The base of the object that defines Python's API, or nullptr (no Python in the process).
const void* python_base() {
  Dl_info di{};
  const void* v = dlsym(RTLD_DEFAULT, "Py_Version");
  return v && dladdr(v, &di) ? di.dli_fbase : nullptr;
}

Kind classify(uintptr_t a) {
  Dl_info di{};
  if (!dladdr(reinterpret_cast<void*>(a - 1), &di) || !di.dli_fbase) return kProgram;
  static const void* const self = [] {
    Dl_info me{};
    return dladdr(reinterpret_cast<const void*>(&python_base), &me) ? me.dli_fbase : nullptr;
  }();
  if (di.dli_fbase == self) return kPassThrough;  // libhier itself (its Fortran wrappers)
  const char* path = di.dli_fname ? di.dli_fname : "";
  const char* slash = std::strrchr(path, '/');
  const char* base = slash ? slash + 1 : path;
  // The MPI (libmpi*, with Open MPI's and MPICH's Fortran bindings libmpi_mpifh, libmpi_usempif08,
  // libmpifort; libmpich*), the C and C++ runtimes, Horovod's ops library.
  static const char* const kPass[] = {"libmpi", "libpmpi", "libmpich", "libopen-", "libc.so", "libc-",
                                      "ld-linux", "libstdc++", "libgcc_s", "libgfortran", "libhorovod"};
  for (const char* p : kPass)
    if (starts_with(base, p)) return kPassThrough;
  if (std::strstr(path, "/horovod/")) return kPassThrough;  // horovod/{torch,tensorflow}/mpi_lib*.so
  if (std::strstr(path, "/mpi4py/") || starts_with(base, "libpython")) return kPython;
  if (di.dli_fbase == python_base()) return kPython;  // a python executable with the interpreter in it
  return kProgram;
}

// (address << 2) | kind per distinct address; 0: free. Filled once per address, never emptied.
constexpr int kSlots = 2048;  // a power of two
std::atomic<uintptr_t> g_kinds[kSlots];

Kind kind_of(const void* p) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const uint64_t h = (static_cast<uint64_t>(a) * 0x9E3779B97F4A7C15ull) >> 53;  // 11 bits: kSlots
  for (int i = 0; i < 8; ++i) {
    std::atomic<uintptr_t>& s = g_kinds[(h + static_cast<uint64_t>(i)) & (kSlots - 1)];
    uintptr_t v = s.load(std::memory_order_relaxed);
    if (v >> 2 == a) return static_cast<Kind>(v & 3);
    if (v == 0) {
      const Kind k = classify(a);
      s.compare_exchange_strong(v, (a << 2) | k, std::memory_order_relaxed);  // lost: another address took it
      return k;
    }
  }
  return classify(a);  // the table is full around this address: found again at every call
}

using Backtrace = int (*)(void**, int);

// libunwind's unw_backtrace, from Debian's libunwind8 (libunwind-dev's library), dlopened
// RTLD_LOCAL at the first walk: libhier.so does not depend on it, and its backtrace and
// _Unwind_Backtrace never take the place of glibc's and libgcc's in the program.
Backtrace unwinder() noexcept {
  static const Backtrace f = []() -> Backtrace {
    void* h = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
    return h ? reinterpret_cast<Backtrace>(dlsym(h, "unw_backtrace")) : nullptr;
  }();
  return f;
}

constexpr int kMaxFrames = 48;

}  // namespace

const void* call_site(const void* ra) noexcept {
  Kind k = kind_of(ra);
  if (__builtin_expect(k == kProgram, 1)) return ra;
  if (k == kPassThrough) {
    const Backtrace bt = unwinder();
    void* pcs[kMaxFrames];
    const int n = bt ? bt(pcs, kMaxFrames) : 0;
    for (int i = 1; i < n && k == kPassThrough; ++i) {  // pcs[0]: this function
      const Kind ki = kind_of(pcs[i]);
      if (ki == kProgram) return pcs[i];
      if (ki == kPython) k = kPython;
    }
    if (k == kPassThrough) return ra;  // no frame of the program (a background thread)
  }
  const void* py = python::current_site();
  return py ? py : ra;
}

}  // namespace hier::diag
