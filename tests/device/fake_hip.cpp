// The HIP runtime entry points libhier uses (libamdhip64.so.6), with their real signatures,
// answered from the regions fake_gpu.cpp maps, as fake_cuda.cpp does for the CUDA driver: the
// pointer query (ROCm 6's hipMemoryType values, or ROCm 5's where FAKE_HIP_VERSION is below 60000000,
// which libhier reads through hipRuntimeGetVersion), and hipMemcpy (hipMemcpyDefault) through
// the regions' read-write aliases. Preloaded so that libhier's dlopen(RTLD_NOLOAD) probe finds "a
// HIP runtime in the process" (the path of a Frontier node).
#include <cstdlib>
#include <cstring>

#include "fake_gpu.h"

namespace {
int version() {
  const char* v = std::getenv("FAKE_HIP_VERSION");
  return v ? std::atoi(v) : 60200000;  // ROCm 6.2
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int hipRuntimeGetVersion(int* v) {
  *v = version();
  return 0;
}

// FAKE_GPU_DEVICES devices (1 by default), unless fault injection says otherwise (hipErrorNoDevice = 100: a ROCm install on a
// machine without a GPU, as Debian's libamdhip64 answers here).
extern "C" __attribute__((visibility("default"))) int hipGetDeviceCount(int* n) {
  if (int rc = fake_gpu_fail("hipGetDeviceCount")) {
    *n = 0;
    return rc;
  }
  *n = fake_gpu_device_count();
  return 0;
}
// The calling thread's device (fake_gpu.cpp keeps it).
extern "C" __attribute__((visibility("default"))) int hipSetDevice(int d) { return fake_gpu_set_device(d); }
extern "C" __attribute__((visibility("default"))) int hipGetDevice(int* d) {
  *d = fake_gpu_get_device();
  return 0;
}

extern "C" __attribute__((visibility("default"))) int hipPointerGetAttribute(void* data, int attribute, void* ptr) {
  const int kind = fake_gpu_kind(ptr);
  // An injected error answers for host memory only: a runtime that fails a query on its own
  // device memory cannot be told from one that does not know it, and host code would touch it.
  if (kind == 0)
    if (int rc = fake_gpu_fail("hipPointerGetAttribute")) return rc;
  if (kind == 0) return 1;  // hipErrorInvalidValue: memory HIP does not know
  const bool rocm6 = version() >= 60000000;
  if (attribute == 8) {  // HIP_POINTER_ATTRIBUTE_IS_MANAGED
    *static_cast<bool*>(data) = kind == 3;
    return 0;
  }
  if (attribute == 9) {  // HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    *static_cast<int*>(data) = fake_gpu_device_of(ptr);
    return 0;
  }
  if (attribute == 2) {  // HIP_POINTER_ATTRIBUTE_MEMORY_TYPE: hipMemoryTypeDevice (6: 2; 5: 1)
    *static_cast<unsigned int*>(data) = rocm6 ? 2 : 1;
    return 0;
  }
  return 1;
}

// hipMemcpy(dst, src, bytes, hipMemcpyDefault = 4): direction from the pointers; no context
// to push (HIP's device is per thread and set by the program).
extern "C" __attribute__((visibility("default"))) int hipMemcpy(void* dst, const void* src, size_t bytes, int kind) {
  if (kind != 4) return 1;  // libhier only ever asks for hipMemcpyDefault
  if (int rc = fake_gpu_fail("hipMemcpy")) return rc;
  fake_gpu_copy(dst, src, bytes);
  return 0;
}
