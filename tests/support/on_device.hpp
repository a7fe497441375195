// TEST_ON_DEVICE=1 (the device_* variants of tests/coll and tests/dtype): the call under
// test gets each of its buffers as a copy in the stand-in runtime's "device memory"
// (tests/device/fake_gpu.h: a region host code can never touch), and what the call
// left there is copied back into the host vectors that the test then compares with PMPI's
// result on host memory. So every case of these suites also runs on device buffers, through
// whichever path libhier takes (its schedules bound to the device, staged, or host copies).
// The stand-in is preloaded by those variants only and found with dlsym, so that the others
// never load it. Off: the call gets the vectors' own memory.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

namespace hier::test {

struct DeviceFns {
  void* (*alloc)(size_t, int);
  void (*release)(void*);
  void (*copy)(void*, const void*, size_t);
};

// Null unless TEST_ON_DEVICE=1; then the stand-in runtime's functions, or the run ends.
inline const DeviceFns* device_fns() {
  static const DeviceFns* fns = []() -> const DeviceFns* {
    const char* v = std::getenv("TEST_ON_DEVICE");
    if (!v || std::strcmp(v, "1") != 0) return nullptr;
    static DeviceFns f{reinterpret_cast<void* (*)(size_t, int)>(dlsym(RTLD_DEFAULT, "fake_gpu_alloc")),
                       reinterpret_cast<void (*)(void*)>(dlsym(RTLD_DEFAULT, "fake_gpu_free")),
                       reinterpret_cast<void (*)(void*, const void*, size_t)>(dlsym(RTLD_DEFAULT, "fake_gpu_copy"))};
    if (!f.alloc || !f.release || !f.copy) {
      std::fprintf(stderr, "TEST_ON_DEVICE=1 needs tests/device's libfake_gpu.so preloaded\n");
      std::abort();
    }
    return &f;
  }();
  return fns;
}

// Whether the MPI under test takes device pointers (the stand-in's FAKE_GPU_AWARE=1): cases that
// libhier leaves to the MPI on device memory (MPI_BOTTOM types of device addresses) need one.
inline bool mpi_takes_device_pointers() {
  const char* v = std::getenv("FAKE_GPU_AWARE");
  return v && v[0] == '1';
}

namespace on_device_detail {
template <class V>
size_t bytes(const V& v) {
  return v.size() * sizeof(typename V::value_type);
}
// The device buffer of argument `slot`, at least `n` bytes: kept from call to call and grown
// when too small, since the stand-in never hands an address out twice (so that a use after free
// shows) and a test of 10,000 calls would otherwise run out of its address space.
inline void* buffer(const DeviceFns& f, size_t slot, size_t n) {
  struct Kept {
    void* p = nullptr;
    size_t n = 0;
  };
  static thread_local Kept kept[4];
  Kept& k = kept[slot];
  if (k.n < n) {
    if (k.p) f.release(k.p);
    k.n = n < 4096 ? 4096 : n;
    k.p = f.alloc(k.n, 0);
  }
  return k.p;
}
template <class Call, class... V, size_t... I>
int run(const DeviceFns& f, Call& call, std::index_sequence<I...>, V&... v) {
  static_assert(sizeof...(V) <= 4, "at most 4 buffers per call");
  void* d[] = {buffer(f, I, bytes(v) ? bytes(v) : 1)...};
  (f.copy(d[I], v.data(), bytes(v)), ...);
  const int rc = call(d[I]...);
  // Back into every vector the call could write (a send buffer too: a write there shows).
  ((std::is_const_v<V> ? void() : f.copy(const_cast<void*>(static_cast<const void*>(v.data())), d[I], bytes(v))), ...);
  return rc;
}
}  // namespace on_device_detail

// call(p...): the collective under test, given one pointer per vector in v (in order).
template <class Call, class... V>
int on_device(Call call, V&... v) {
  if (const DeviceFns* f = device_fns())
    return on_device_detail::run(*f, call, std::index_sequence_for<V...>{}, v...);
  return call(const_cast<void*>(static_cast<const void*>(v.data()))...);
}

// For calls that keep a buffer past their return (MPI_Isend / MPI_Irecv until the request
// completes, MPI_BOTTOM types built from its addresses): vector v's copy in device memory for as
// long as this object lives, when TEST_ON_DEVICE=1 and `on` (the libhier side of a test that also
// runs the PMPI reference); else v's own memory. back() copies the device bytes into v.
template <class V>
class DeviceCopy {
 public:
  using T = typename V::value_type;
  explicit DeviceCopy(V& v, bool on = true) : v_(v), f_(on ? device_fns() : nullptr) {
    if (!f_) return;
    p_ = static_cast<T*>(f_->alloc(bytes() ? bytes() : 1, 0));  // a new one: freed when done
    f_->copy(p_, v.data(), bytes());
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() {
    if (f_) f_->release(p_);
  }
  T* data() const { return f_ ? p_ : const_cast<T*>(v_.data()); }
  // v's contents as the device holds them now (v itself when not on the device).
  V& back() {
    if (f_) f_->copy(const_cast<T*>(v_.data()), p_, bytes());
    return v_;
  }

 private:
  size_t bytes() const { return on_device_detail::bytes(v_); }
  V& v_;
  const DeviceFns* f_;
  T* p_ = nullptr;
};

}  // namespace hier::test
