// MPI_Pack / MPI_Unpack whose typed buffer is in device memory, run by the GPU module's kernels
// (device/module.hpp; TEMPI's idea): the block program is copied to the device once per
// datatype, and the packed bytes are written straight into the output, or through a device
// scratch buffer and one copy when the packed side is host memory. The bytes are the host
// engine's, which are the MPI's (tests/device/module_test.cpp, tests/dtype/random_pack_test.cpp).
// Same contract as dtype/pack_calls.hpp: nullopt sends the call elsewhere (the staged path or
// the MPI): a host typed side, a type without an exact form, an erroneous call, or a module
// that failed before writing anything.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>

#include "device/module.hpp"

namespace hier::dtype {

std::optional<int> device_pack_call(const device::ModuleTable& m, const void* inbuf, int64_t incount, MPI_Datatype t,
                                    void* outbuf, int64_t outsize, int64_t& position, MPI_Comm comm, int64_t limit);
std::optional<int> device_unpack_call(const device::ModuleTable& m, const void* inbuf, int64_t insize,
                                      int64_t& position, void* outbuf, int64_t outcount, MPI_Datatype t, MPI_Comm comm,
                                      int64_t limit);

}  // namespace hier::dtype
