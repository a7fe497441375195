// The CUDA driver entry points libhier uses (libcuda.so.1), with their real signatures, answered
// from the regions fake_gpu.cpp maps: the pointer query, and the copies (through the regions'
// read-write aliases) with the context calls around them. Loaded (preloaded, or dlopen'ed late by a test) so that
// libhier's dlopen(RTLD_NOLOAD) probe finds "a CUDA runtime in the process".
#include "fake_gpu.h"

static int g_context;            // the one context's handle is its address
static thread_local int g_depth;  // contexts pushed on this thread

// FAKE_GPU_DEVICES devices (1 by default) after cuInit (which the stand-in needs no call for),
// unless fault injection says otherwise (CUDA_ERROR_NO_DEVICE = 100).
extern "C" __attribute__((visibility("default"))) int cuDeviceGetCount(int* n) {
  if (int rc = fake_gpu_fail("cuDeviceGetCount")) {
    *n = 0;
    return rc;
  }
  *n = fake_gpu_device_count();
  return 0;
}

extern "C" __attribute__((visibility("default"))) int cuPointerGetAttribute(void* data, int attribute,
                                                                           unsigned long long ptr) {
  const int kind = fake_gpu_kind(reinterpret_cast<const void*>(ptr));
  // Injected errors answer for host memory only (as in fake_hip.cpp).
  if (kind == 0)
    if (int rc = fake_gpu_fail("cuPointerGetAttribute")) return rc;
  if (kind == 0) return 1;  // CUDA_ERROR_INVALID_VALUE: memory CUDA does not know
  if (attribute == 8) {     // CU_POINTER_ATTRIBUTE_IS_MANAGED: a bool
    *static_cast<bool*>(data) = kind == 3;
    return 0;
  }
  if (attribute == 2) {  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE: CU_MEMORYTYPE_DEVICE
    *static_cast<unsigned int*>(data) = 2;
    return 0;
  }
  if (attribute == 9) {  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    *static_cast<int*>(data) = fake_gpu_device_of(reinterpret_cast<const void*>(ptr));
    return 0;
  }
  if (attribute == 1) {  // CU_POINTER_ATTRIBUTE_CONTEXT: one context owns every region
    *static_cast<void**>(data) = &g_context;
    return 0;
  }
  return 1;
}

// cuMemcpy must run with a context current (libhier pushes the pointer's own): checked here, so
// that a copy made without one fails as it would on a GPU.
extern "C" __attribute__((visibility("default"))) int cuCtxPushCurrent_v2(void* ctx) {
  if (ctx != &g_context) return 201;  // CUDA_ERROR_INVALID_CONTEXT
  ++g_depth;
  return 0;
}
extern "C" __attribute__((visibility("default"))) int cuCtxPopCurrent_v2(void** ctx) {
  if (g_depth == 0) return 201;
  --g_depth;
  if (ctx) *ctx = &g_context;
  return 0;
}
extern "C" __attribute__((visibility("default"))) int cuMemcpy(unsigned long long dst, unsigned long long src,
                                                               size_t bytes) {
  if (g_depth == 0) return 201;
  if (int rc = fake_gpu_fail("cuMemcpy")) return rc;
  fake_gpu_copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return 0;
}
extern "C" __attribute__((visibility("default"))) int cuStreamSynchronize(void*) { return fake_gpu_fail("cuStreamSynchronize"); }
