// The stand-in for a GPU runtime that the device tests preload (see fake_gpu.cpp).
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
// Maps `bytes` of "device memory": PROT_NONE for good, so any access by host code faults (and
// the fault handler names it); the runtime's copies and the stand-in GPU-aware MPI go through a
// read-write alias of the same pages (fake_gpu.cpp).
void* fake_gpu_alloc(size_t bytes, int managed);
// Unmaps an allocation of fake_gpu_alloc.
void fake_gpu_free(void* p);
// Copies in or out of "device memory" (the test's own cudaMemcpy).
void fake_gpu_copy(void* dst, const void* src, size_t bytes);
// 0 host, 2 device, 3 managed: what the runtime stand-ins report.
int fake_gpu_kind(const void* p);
#ifdef __cplusplus
}
#endif
