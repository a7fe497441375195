// MPI_Pack / MPI_Unpack / MPI_Pack_size done by the engine. Each returns the MPI return code, or
// nullopt when the call must go to the MPI unchanged: a type without an exact canonical form,
// and every erroneous call (too small a buffer, bad count, null communicator), so that errors
// are raised by the MPI with its own codes and error handlers.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>

namespace hier::dtype {

// MPICH 4.0 rejects null buffers in MPI_Pack/Unpack (so MPI_BOTTOM too): such calls go to it
// unchanged, staged or packed by libhier they would succeed where the MPI's own fail.
inline bool null_rejected(const void* p) {
#if defined(MPICH_VERSION)
  return p == nullptr;
#else
  (void)p;
  return false;
#endif
}

// `limit`: the largest position / size the caller's integer type can hold.
std::optional<int> pack_call(const void* inbuf, int64_t incount, MPI_Datatype t, void* outbuf, int64_t outsize,
                             int64_t& position, MPI_Comm comm, int64_t limit);
std::optional<int> unpack_call(const void* inbuf, int64_t insize, int64_t& position, void* outbuf, int64_t outcount,
                               MPI_Datatype t, MPI_Comm comm, int64_t limit);
std::optional<int> pack_size_call(int64_t incount, MPI_Datatype t, MPI_Comm comm, int64_t& size, int64_t limit);

}  // namespace hier::dtype
