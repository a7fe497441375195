// The simulated device's runtime: what gpu/shim.hpp needs from a GPU runtime, over memory that
// the host code cannot touch. The memory itself belongs to the process's simulated device
// (tests/device/fake_gpu.cpp), reached through C hooks it exports:
//   void* hier_sim_alloc(size_t)   "device memory": host accesses to it fault;
//   void  hier_sim_free(void*)
//   void* hier_sim_alias(const void*)  the read-write alias of a device address (other
//                                      addresses unchanged), for the simulated kernels only;
//   optional: int hier_sim_fail(const char* call)  fault injection (see injected());
//             int hier_sim_fiber_lanes(void)  non-zero: kernels run their lanes as fibers
//                                             (fiber_lanes());
//             void hier_sim_span(const void* stream, const char* what, uint64_t queued_ns,
//                                uint64_t begin_ns, uint64_t end_ns)  each stream operation:
//                                when the host queued it, and its run (CLOCK_MONOTONIC).
// Streams are worker threads: a kernel or copy runs later, on the stream's thread, after a short
// delay, so a caller that reads a result without synchronizing sees stale bytes or faults, as on
// a GPU.
//
// Kernels execute as on a GPU, on OS threads (docs/device-buffers.md, "The simulated device"):
// a process-wide pool of kRunners block runners, each with kMaxBlock lane threads, runs the
// blocks of every stream's kernels concurrently; the lanes of a block run concurrently too,
// grouped in warps of kWarp lanes. syncthreads() is a barrier over the block's lanes, shfl_xor /
// shfl / ballot / syncwarp are lane-synchronous within the warp (every lane of the warp must call
// them, as with the *_sync intrinsics' full mask), shared_memory() is the block's own scratch.
// Threads rather than fibers: lanes then really run at the same time, so a missing barrier gives
// wrong results, and ThreadSanitizer sees every lane's accesses with the barriers' ordering
// (fibers would serialize the lanes and hide both). A lane that reaches a different barrier than
// its block or warp (syncthreads under a divergent branch, or the kernel's end) stops the process
// with a message instead of hanging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
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

// Queues work on stream s (null: the default stream); `what` names it to the span hook.
int enqueue(Stream s, std::function<void()> work, const char* what = "op");
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
// The machine's optional hier_sim_begin hook: a stream operation begins (tests may hold it there).
void op_begins(Stream s);
// Events as simStreamWaitEvent needs them: the latest record's number, and waiting for it.
uint64_t event_recorded(Event e);
void event_wait_for(Event e, uint64_t n);
void event_unwaited(Event e);  // returns once no stream's queued wait refers to e
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

// The simulated device's shape. A launch runs at most kMaxGrid blocks of at most kMaxBlock lanes,
// whatever it asks: the kernels stride over their work by gridDim * blockDim, so fewer lanes do
// the same work. A block is whole warps of kWarp lanes (kWarp: a power of two, smaller than a
// GPU's so that the thread count stays sane; kernels must not assume 32 or 64). kRunners blocks
// run at once over all streams, so two streams' kernels overlap.
inline constexpr unsigned kWarp = 8;
inline constexpr unsigned kMaxBlock = 2 * kWarp, kMaxGrid = 2, kRunners = 2 * kMaxGrid;
inline constexpr size_t kSharedBytes = 16 * 1024;

// ---- inside a kernel (a lane's calls; anywhere else they stop the process) ----
void syncthreads();  // __syncthreads: every lane of the block, memory ordered across it
void syncwarp();     // __syncwarp: every lane of the warp
// Every lane of the warp passes v and gets lane `src`'s (warp-relative; the lane's own v where
// src is not a lane of the warp): the exchange under shfl / shfl_xor, 8 bytes at most.
uint64_t exchange(uint64_t v, unsigned src);
// __ballot_sync: bit i is lane i's predicate, over the warp.
unsigned ballot(bool p);
// The block's shared memory (kSharedBytes, 16-byte aligned, the same address for all its lanes,
// not initialized): one region; a kernel carves its arrays out of it.
void* shared_memory();
// The lane's index in its warp.
unsigned lane_id();

template <class T>
T shfl(T v, int src_lane) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t), "shfl: 8 bytes at most");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  b = exchange(b, static_cast<unsigned>(src_lane));
  std::memcpy(&v, &b, sizeof v);
  return v;
}
// __shfl_xor_sync: lane l gets lane (l ^ lane_mask)'s v (its own where that is not in the warp).
template <class T>
T shfl_xor(T v, int lane_mask) {
  return shfl(v, static_cast<int>(lane_id() ^ static_cast<unsigned>(lane_mask)));
}

// ---- launching ----
// Whether a launch now runs its lanes as fibers on the stream's thread (sim_runtime.cpp, "lanes as
// fibers": the process's hook hier_sim_fiber_lanes() says so, never in a sanitizer build) rather
// than on the block runners' lane threads.
bool fiber_lanes();
// Runs `body` as a grid of g blocks of b lanes on the block runners, and returns when every
// block has ended (the stream's thread waits there, as a stream waits for its kernel).
void run_grid(const std::function<void()>& body, unsigned g, unsigned b);

template <class... P, class... A>
int run_kernel(void (*kernel)(P...), unsigned grid, unsigned block, Stream s, A... args) {
  const unsigned g = grid < 1 ? 1 : grid < kMaxGrid ? grid : kMaxGrid;
  const unsigned b = block < 1 ? 1 : block < kMaxBlock ? block : kMaxBlock;
  if (int rc = injected("launch")) return rc;
  if (int rc = check_stream(s)) return rc;
  for (const void* p : {static_cast<const void*>(nullptr), device_arg(args)...})
    if (int rc = check_arg(s, p)) return rc;
  return enqueue(
      s,
      [=] {
        // Device addresses through their aliases, once for the whole grid.
        const std::tuple<P...> a{static_cast<P>(arg(args))...};
        run_grid([&] { std::apply(kernel, a); }, g, b);
      },
      "kernel");
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
