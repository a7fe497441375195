// The pointer query of the CUDA driver (libcuda.so.1), with its real signature, answered from
// the regions fake_gpu.cpp maps. Loaded (preloaded, or dlopen'ed late by a test) so that
// libhier's dlopen(RTLD_NOLOAD) probe finds "a CUDA runtime in the process".
#include "fake_gpu.h"

extern "C" __attribute__((visibility("default"))) int cuPointerGetAttribute(void* data, int attribute,
                                                                           unsigned long long ptr) {
  const int kind = fake_gpu_kind(reinterpret_cast<const void*>(ptr));
  if (kind == 0) return 1;  // CUDA_ERROR_INVALID_VALUE: memory CUDA does not know
  if (attribute == 8) {     // CU_POINTER_ATTRIBUTE_IS_MANAGED: a bool
    *static_cast<bool*>(data) = kind == 3;
    return 0;
  }
  if (attribute == 2) {  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE: CU_MEMORYTYPE_DEVICE
    *static_cast<unsigned int*>(data) = 2;
    return 0;
  }
  return 1;
}
