// The simulated device's runtime: what gpu/shim.hpp needs from a GPU runtime, over memory that
// the host code cannot touch. The memory itself belongs to the process's simulated device
// (tests/device/fake_gpu.cpp), reached through three C hooks it exports:
//   void* hier_sim_alloc(size_t)   "device memory": host accesses to it fault;
//   void  hier_sim_free(void*)
//   void* hier_sim_alias(const void*)  the read-write alias of a device address (other
//                                      addresses unchanged), for the simulated kernels only.
// Streams are worker threads: a kernel or copy runs later, on the stream's thread, after a short
// delay, so a caller that reads a result without synchronizing sees stale bytes or faults, as on
// a GPU. Kernels run thread by thread (blockIdx / threadIdx set for each): they must not use
// shared memory or barriers, which the module's kernels do not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "device/locate.hpp"

#define __global__

namespace hier::gpu::sim {

struct dim3 {
  unsigned x = 0, y = 0, z = 0;
};
extern thread_local dim3 blockIdx, threadIdx, blockDim, gridDim;

struct StreamImpl;
using Stream = StreamImpl*;
struct EventImpl;
using Event = EventImpl*;

int enqueue(Stream s, std::function<void()> work);

// Devices (gpu/sim_device.cpp): the simulated machine's devices, from its hooks (one device
// without them). A stream belongs to the device current when it was made; work queued on it
// from a thread whose current device is another fails (check_stream), as does a kernel handed
// device memory of another device than its stream's (check_arg).
int current_device();
int device_of(const void* p);  // -1: not device memory
void note_stream(Stream s, bool made);
int stream_device(Stream s);
int check_stream(Stream s);
int check_arg(Stream s, const void* p);
// The record of when each stream operation ran (the machine's hier_sim_trace hook, if any).
struct Stamp {
  long long t0;
};
Stamp stamp_begin(Stream s);
void stamp_end(Stream s, Stamp b);
// Events as simStreamWaitEvent needs them: the latest record's number, and waiting for it.
uint64_t event_recorded(Event e);
void event_wait_for(Event e, uint64_t n);
template <class A>
const void* device_arg(A a) {
  if constexpr (std::is_pointer_v<A>) return a;
  else return nullptr;
}
// Whether the process has a simulated device (its hooks): without one the module is unusable.
bool usable();
void* alias(const void* p);
// Fault injection by the process's simulated device (its optional hook hier_sim_fail): the runtime
// error `call` answers this time instead of working, or 0. A launch that fails answers 719, the
// launch-failure code of both runtimes.
int injected(const char* call);

// Launch arguments as the simulated kernel sees them: device addresses through their aliases.
template <class T>
T* arg(T* p) { return static_cast<T*>(alias(p)); }
inline device::ProgramView arg(device::ProgramView v) {
  v.p.items = arg(v.p.items);
  v.p.seqs = arg(v.p.seqs);
  v.p.entries = arg(v.p.entries);
  v.p.offsets = arg(v.p.offsets);
  v.item_at = arg(v.item_at);
  v.entry_at = arg(v.entry_at);
  return v;
}
template <class T>
T arg(T v) { return v; }

// At most this many blocks and threads run, whatever the launch asks: the kernels stride over
// their work by gridDim * blockDim, so fewer threads do the same work.
inline constexpr unsigned kMaxGrid = 2, kMaxBlock = 4;

template <class... P, class... A>
int run_kernel(void (*kernel)(P...), unsigned grid, unsigned block, Stream s, A... args) {
  const unsigned g = grid < kMaxGrid ? grid : kMaxGrid, b = block < kMaxBlock ? block : kMaxBlock;
  if (int rc = injected("launch")) return rc;
  if (int rc = check_stream(s)) return rc;
  for (const void* p : {static_cast<const void*>(nullptr), device_arg(args)...})
    if (int rc = check_arg(s, p)) return rc;
  return enqueue(s, [=] {
    gridDim = {g, 1, 1};
    blockDim = {b, 1, 1};
    for (unsigned i = 0; i < g; ++i)
      for (unsigned t = 0; t < b; ++t) {
        blockIdx = {i, 0, 0};
        threadIdx = {t, 0, 0};
        kernel(static_cast<P>(arg(args))...);
      }
  });
}

inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

}  // namespace hier::gpu::sim

// The runtime calls, spelled as gpu/shim.hpp's GPU(name) expands them.
using simStream_t = hier::gpu::sim::Stream;
using simError_t = int;
inline constexpr int simSuccess = 0, simMemcpyDefault = 4;
inline constexpr unsigned simStreamNonBlocking = 1;
int simMalloc(void** p, size_t n);
int simFree(void* p);
int simMallocHost(void** p, size_t n);  // ordinary host memory: the simulation has no paging to avoid
int simFreeHost(void* p);
int simStreamCreateWithFlags(simStream_t* s, unsigned flags);
int simStreamDestroy(simStream_t s);
int simStreamSynchronize(simStream_t s);
int simMemcpyAsync(void* dst, const void* src, size_t n, int kind, simStream_t s);
int simMemsetAsync(void* p, int value, size_t n, simStream_t s);
// Events: a record is one more operation on its stream; synchronize waits for the latest record.
using simEvent_t = hier::gpu::sim::Event;
inline constexpr unsigned simEventDisableTiming = 2;
int simEventCreateWithFlags(simEvent_t* e, unsigned flags);
int simEventDestroy(simEvent_t e);
int simEventRecord(simEvent_t e, simStream_t s);
int simEventSynchronize(simEvent_t e);
int simGetLastError();
int simGetDevice(int* d);
int simSetDevice(int d);
int simStreamWaitEvent(simStream_t s, simEvent_t e, unsigned flags);
using hier::gpu::sim::atomicAdd;
using hier::gpu::sim::blockDim;
using hier::gpu::sim::blockIdx;
using hier::gpu::sim::gridDim;
using hier::gpu::sim::threadIdx;
