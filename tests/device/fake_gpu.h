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
// Fault injection: the error code the runtime entry point `call` answers this time instead of
// working, or 0. FAKE_GPU_FAIL=call:n:code[,...] fails the n-th call of `call` (counted from 1 in
// this process), call:n+:code the n-th and every later one. The names are the runtime's own
// (hipMemcpy, cuMemcpy, hipGetDeviceCount, ...) and the simulated module's (simMalloc,
// simMemcpyAsync, launch, ...: src/gpu/sim_runtime.cpp asks through hier_sim_fail).
int fake_gpu_fail(const char* call);
#ifdef __cplusplus
}
#endif
