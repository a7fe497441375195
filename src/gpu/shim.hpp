// The one place where the GPU APIs differ: CUDA and HIP spell the same runtime calls with
// another prefix (cudaMalloc / hipMalloc ...), and the simulated device (gpu/sim_runtime.hpp)
// spells them `sim...`. The kernel source (gpu/module.cu) writes GPU(Malloc) and launch(...)
// and is compiled unchanged by nvcc, hipcc and the host compiler.
#pragma once

#if defined(HIER_GPU_SIM)
#include "gpu/sim_runtime.hpp"
#define GPU(name) sim##name
#elif defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define GPU(name) hip##name
#else
#include <cuda_runtime.h>
#define GPU(name) cuda##name
#endif

#include <utility>

namespace hier::gpu {

using Stream = GPU(Stream_t);

// Page-locked host memory: HIP's call takes flags (and its name another order).
inline int host_malloc(void** p, size_t n) {
#if defined(__HIPCC__) && !defined(HIER_GPU_SIM)
  return static_cast<int>(hipHostMalloc(p, n, 0));
#else
  return static_cast<int>(GPU(MallocHost)(p, n));
#endif
}
inline int host_free(void* p) {
#if defined(__HIPCC__) && !defined(HIER_GPU_SIM)
  return static_cast<int>(hipHostFree(p));
#else
  return static_cast<int>(GPU(FreeHost)(p));
#endif
}

// The device that owns memory p (*d = -1: host memory, or memory this runtime does not know).
// A failed query is cleared from the runtime's last error, which the next launch reads.
inline int pointer_device_of(const void* p, int* d) {
#if defined(HIER_GPU_SIM)
  *d = sim::device_of(p);
#elif defined(__HIPCC__)
  int dev = -1;
  if (hipPointerGetAttribute(&dev, HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                             reinterpret_cast<hipDeviceptr_t>(const_cast<void*>(p))) != hipSuccess) {
    (void)hipGetLastError();
    dev = -1;
  }
  *d = dev;
#else
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    *d = -1;
  } else {
    *d = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
  }
#endif
  return 0;
}

// ---- inside kernels: the warp (wavefront) ----------------------------------------------------
// HIER_DEVICE marks functions that only kernels call. The kernels cooperate within a warp only
// (shuffles, no shared memory), so the simulated device needs no shared memory for them.
#if defined(HIER_GPU_SIM)
#define HIER_DEVICE
#else
#define HIER_DEVICE __device__
#endif

// The lanes of a warp: 64 on gfx90a / gfx942 (a wavefront: warpSize under HIP), 32 on NVIDIA,
// sim::kWarp on the simulated device. A power of two.
HIER_DEVICE inline unsigned lanes() {
#if defined(HIER_GPU_SIM)
  return sim::kWarp;
#elif defined(__HIPCC__)
  return static_cast<unsigned>(warpSize);
#else
  return 32;
#endif
}
// The same, known to the host code that sizes a launch (a HIP device of another wavefront size
// gets a grid of another size, never a wrong result: the kernels stride over their work).
inline constexpr unsigned host_lanes() {
#if defined(HIER_GPU_SIM)
  return sim::kWarp;
#elif defined(__HIPCC__)
  return 64;
#else
  return 32;
#endif
}
// Lane l gets lane (l ^ m)'s v; every lane of the warp takes part (m < lanes()).
template <class T>
HIER_DEVICE inline T shfl_xor(T v, int m) {
#if defined(HIER_GPU_SIM)
  return sim::shfl_xor(v, m);
#elif defined(__HIPCC__)
  return __shfl_xor(v, m);
#else
  return __shfl_xor_sync(0xffffffffu, v, m);
#endif
}
// A barrier over the thread block (no module kernel needs one today).
HIER_DEVICE inline void sync_block() {
#if defined(HIER_GPU_SIM)
  sim::syncthreads();
#else
  __syncthreads();
#endif
}

// A kernel launch: grid blocks of `block` threads on stream s; 0 or the runtime's error.
template <class... P, class... A>
int launch(void (*kernel)(P...), unsigned grid, unsigned block, Stream s, A... args) {
#if defined(HIER_GPU_SIM)
  return sim::run_kernel(kernel, grid, block, s, args...);
#else
  kernel<<<grid, block, 0, s>>>(args...);
  return static_cast<int>(GPU(GetLastError)());
#endif
}

}  // namespace hier::gpu
