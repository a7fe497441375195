// Copies between host and device memory made by the GPU runtime the program loaded, and whether
// the MPI below accepts device pointers. Together they let libhier run its host schedules on
// device buffers under an MPI that is not GPU-aware (Debian's Open MPI and MPICH): the buffers
// are copied to host memory by the runtime, never touched by libhier's CPU code in place.
#pragma once

#include <cstddef>

#include "device/pointer.hpp"

namespace hier::device {

// Copies n bytes from src to dst, either of which may be device memory of the runtime found
// (device::runtime()). Synchronous: when it returns true the bytes are at dst, for the host and
// for every stream of the device. False: no runtime, or the runtime refused (nothing usable at dst).
bool runtime_copy(void* dst, const void* src, size_t n);

// Whether the MPI takes device pointers of runtime r: `forced` (HIER_GPU_AWARE: 0 no, 1 yes,
// -1 auto, config::Config::gpu_aware, passed in by the layers that read the settings), or the
// MPI's own answer through MPIX_GPU_query_support (MPICH) or MPIX_Query_cuda_support /
// MPIX_Query_rocm_support (Open MPI), found with dlsym so that no MPI needs to have them; an
// MPI that has none is taken as not GPU-aware. The same on every rank of a job (one MPI library,
// one agreed HIER_GPU_AWARE).
bool mpi_gpu_aware(Runtime r, int forced);

}  // namespace hier::device
