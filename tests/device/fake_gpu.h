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
// The machine's devices (FAKE_GPU_DEVICES=N, default 1) and the calling thread's current one
// (0 at first): fake_gpu_alloc allocates on it, the runtime stand-ins report it as the pointer's
// device, and the simulated GPU module works on it (src/gpu/sim_device.cpp).
int fake_gpu_device_count(void);
int fake_gpu_get_device(void);
int fake_gpu_set_device(int d);       // 0, or 101 (no such device)
int fake_gpu_device_of(const void* p);  // -1: not device memory
// The simulated module's stream operations, recorded while tracing is on (fake_gpu_trace(1)
// starts a new record, 0 stops it): each operation's stream, kind ("kernel", "copy", "fill",
// "event", "wait") and monotonic times: queued by the host, begun and ended on the stream
// (src/gpu/sim_runtime.hpp's span hook).
typedef struct {
  const void* stream;
  const char* what;
  long long q_ns, t0_ns, t1_ns;
} FakeGpuOp;
void fake_gpu_trace(int on);
int fake_gpu_trace_read(FakeGpuOp* out, int max);
// And the calls that reached this library's PMPI wrappers meanwhile (the MPI entry points libhier
// hands device buffers: every level step of its schedules), with their monotonic start times.
typedef struct {
  const char* name;
  long long t_ns;
} FakeGpuMpiCall;
int fake_gpu_trace_mpi(FakeGpuMpiCall* out, int max);
// Every simulated stream operation waits `us` microseconds before it runs (0: none), as a slower
// device would: a test widens the time an operation is pending with it.
void fake_gpu_slow(int us);
// Holds the next simulated stream operation to begin (on any stream) until an operation of
// another stream ends, or 3 s: work queued on another stream meanwhile runs beside the held one
// only where it is not queued behind it.
void fake_gpu_gate(void);
// Simulated stream operations begun so far on streams of `device` (kernels, copies, fills, ...).
long fake_gpu_ops_on(int device);
#ifdef __cplusplus
}
#endif
