// The runtime's copies and the MPI's GPU-awareness (see runtime_copy.hpp).
//
// ABIs used (stable across versions; no header of either runtime is needed to build):
//   CUDA driver (libcuda.so.1): CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t)
//     copies in any direction under unified addressing, but needs a current context on the
//     calling thread, which an MPI call's thread may lack: the context that owns the device
//     pointer (cuPointerGetAttribute, CU_POINTER_ATTRIBUTE_CONTEXT = 1) is pushed around it
//     (cuCtxPushCurrent_v2 / cuCtxPopCurrent_v2). A copy from pageable host memory may return
//     before the data reaches the device, ordered only on the legacy default stream; the
//     program's next kernel may run on any stream, so that stream is synchronized
//     (cuStreamSynchronize(0)) before returning.
//   HIP (libamdhip64): hipError_t hipMemcpy(void* dst, const void* src, size_t, hipMemcpyKind),
//     hipMemcpyDefault = 4 (direction from the pointers); synchronous for the host.
#include "device/runtime_copy.hpp"

#include <dlfcn.h>

#include <atomic>


namespace hier::device {
namespace {

struct CudaFns {
  int (*memcpy)(unsigned long long, unsigned long long, size_t) = nullptr;
  int (*push)(void*) = nullptr;
  int (*pop)(void**) = nullptr;
  int (*sync)(void*) = nullptr;
};
struct HipFns {
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
};

template <class F>
void look_up(void* h, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(h, name));
}

const CudaFns& cuda() {
  static const CudaFns f = [] {
    CudaFns c;
    void* h = pointer_detail::runtime_handle();
    if (!h) return c;
    look_up(h, c.memcpy, "cuMemcpy");
    look_up(h, c.push, "cuCtxPushCurrent_v2");
    look_up(h, c.pop, "cuCtxPopCurrent_v2");
    look_up(h, c.sync, "cuStreamSynchronize");
    return c;
  }();
  return f;
}

const HipFns& hip() {
  static const HipFns f = [] {
    HipFns c;
    if (void* h = pointer_detail::runtime_handle()) look_up(h, c.memcpy, "hipMemcpy");
    return c;
  }();
  return f;
}

// The context of whichever side is device memory (null: neither, or the driver cannot tell).
void* context_of(const void* a, const void* b) {
  constexpr int kAttrContext = 1;
  using QueryFn = int (*)(void*, int, const void*);
  auto q = reinterpret_cast<QueryFn>(dlsym(pointer_detail::runtime_handle(), "cuPointerGetAttribute"));
  for (const void* p : {a, b}) {
    void* ctx = nullptr;
    if (q && q(&ctx, kAttrContext, p) == 0 && ctx) return ctx;
  }
  return nullptr;
}

bool cuda_copy(void* dst, const void* src, size_t n) {
  const CudaFns& f = cuda();
  if (!f.memcpy) return false;
  void* ctx = f.push && f.pop ? context_of(dst, src) : nullptr;
  if (ctx && f.push(ctx) != 0) return false;
  bool ok = f.memcpy(reinterpret_cast<unsigned long long>(dst), reinterpret_cast<unsigned long long>(src), n) == 0;
  if (ok && f.sync) ok = f.sync(nullptr) == 0;
  if (ctx) {
    void* popped = nullptr;
    f.pop(&popped);
  }
  return ok;
}

}  // namespace

bool runtime_copy(void* dst, const void* src, size_t n) {
  if (n == 0) return true;
  switch (runtime()) {
    case Runtime::Cuda: return cuda_copy(dst, src, n);
    case Runtime::Hip: return hip().memcpy && hip().memcpy(dst, src, n, /*hipMemcpyDefault*/ 4) == 0;
    default: return false;
  }
}

namespace {
bool ask_mpi(Runtime r) {
  // MPICH: MPIX_GPU_query_support(type, &supported), MPIX_GPU_SUPPORT_CUDA = 0, _HIP = 2.
  using GpuQuery = int (*)(int, int*);
  if (auto q = reinterpret_cast<GpuQuery>(dlsym(RTLD_DEFAULT, "MPIX_GPU_query_support"))) {
    int yes = 0;
    return q(r == Runtime::Hip ? 2 : 0, &yes) == 0 && yes != 0;
  }
  // Open MPI: MPIX_Query_cuda_support() (4.x and later), MPIX_Query_rocm_support() (5.x).
  using Query = int (*)();
  auto q = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, r == Runtime::Hip ? "MPIX_Query_rocm_support" : "MPIX_Query_cuda_support"));
  return q && q() != 0;
}
}  // namespace

bool mpi_gpu_aware(Runtime r, int forced) {
  if (forced >= 0) return forced == 1;
  if (r == Runtime::None) return false;
  // The MPI's answer does not change during a run: asked once per runtime (dlsym is slow).
  static std::atomic<int> answers[3] = {-1, -1, -1};
  std::atomic<int>& a = answers[static_cast<int>(r)];
  int v = a.load(std::memory_order_relaxed);
  if (v < 0) a.store(v = ask_mpi(r) ? 1 : 0, std::memory_order_relaxed);
  return v == 1;
}

}  // namespace hier::device
