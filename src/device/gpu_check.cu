// Compile check only (never run, never linked into libhier.so): the device layer's HIER_HD
// bodies built as GPU device code, by nvcc (CUDA, sm_80 and sm_90) and by hipcc (HIP, gfx90a,
// the MI250X) from this one file. It proves that the kernels the host backend runs in the tests
// are device code too; the GPU backend modules (docs/device-buffers.md, "Not yet") launch them.
//   - reductions (device/reduce.hpp): one grid-strided kernel per (op, element type) that MPI
//     defines, over the type table (device/reduce_types.def);
//   - pack / unpack of a leaf item of a block program (device/blocks.hpp, device/kernels.hpp):
//     one thread per point of its dims, found with point_offset.
#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#endif

#include "device/blocks.hpp"
#include "device/kernels.hpp"
#include "device/reduce.hpp"

#include <cstddef>
#include <utility>

namespace hier::device {

template <ReduceOp Op, class T>
__global__ void reduce_kernel(const T* in, T* inout, int64_t n) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  reduce_range<Op>(in, inout, first, n, step);
}

// Every (op, element type) pair MPI defines, instantiated for the device by taking the kernel's
// address in host code (op_allowed decides, so this list cannot drift from the host backend's).
void* sink[256];
int filled = 0;

template <ReduceOp Op, class T, TypeKind K>
void instantiate() {
  if constexpr (op_allowed(Op, K)) sink[filled++] = reinterpret_cast<void*>(&reduce_kernel<Op, T>);
}

template <class T, TypeKind K, size_t... O>
void all_ops(std::index_sequence<O...>) {
  (instantiate<static_cast<ReduceOp>(O), T, K>(), ...);
}

void instantiate_reductions() {
#define HIER_REDUCE_TYPE(e, type, kind, mpi) \
  all_ops<type, TypeKind::kind>(std::make_index_sequence<static_cast<size_t>(ReduceOp::Count)>{});
#include "device/reduce_types.def"
}

// One point per thread: the run of `it.width` bytes at point p goes to packed + p * width.
template <bool kPack>
__global__ void leaf_kernel(Item it, char* origin, char* packed, int64_t points) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < points; p += step)
    move_dir<kPack>(packed + p * it.width, origin + it.off + point_offset(it, p), it.width);
}
template __global__ void leaf_kernel<true>(Item, char*, char*, int64_t);
template __global__ void leaf_kernel<false>(Item, char*, char*, int64_t);

// Rows of a fixed width, and short records of N rows (the struct layouts).
template <int W, bool kPack>
__global__ void rows_kernel(char* packed, char* strided, int64_t n, int64_t stride) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    rows_fixed<W, kPack>(packed + i * W, strided + i * stride, 1, stride);
}
template __global__ void rows_kernel<4, true>(char*, char*, int64_t, int64_t);
template __global__ void rows_kernel<8, true>(char*, char*, int64_t, int64_t);
template __global__ void rows_kernel<16, false>(char*, char*, int64_t, int64_t);

template <int W, int N, bool kPack>
__global__ void short_row_kernel(char* packed, char* strided, int64_t records, int64_t extent, int64_t stride) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < records; r += step)
    short_row<W, N, kPack>(packed + r * W * N, strided + r * extent, stride);
}
template __global__ void short_row_kernel<4, 2, true>(char*, char*, int64_t, int64_t, int64_t);
template __global__ void short_row_kernel<4, 2, false>(char*, char*, int64_t, int64_t, int64_t);
template __global__ void short_row_kernel<8, 3, true>(char*, char*, int64_t, int64_t, int64_t);

}  // namespace hier::device
