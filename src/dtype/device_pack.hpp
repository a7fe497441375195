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
#include "dtype/canon.hpp"

namespace hier::dtype {

std::optional<int> device_pack_call(const device::ModuleTable& m, const void* inbuf, int64_t incount, MPI_Datatype t,
                                    void* outbuf, int64_t outsize, int64_t& position, MPI_Comm comm, int64_t limit);
std::optional<int> device_unpack_call(const device::ModuleTable& m, const void* inbuf, int64_t insize,
                                      int64_t& position, void* outbuf, int64_t outcount, MPI_Datatype t, MPI_Comm comm,
                                      int64_t limit);

// The kernels on one canonical form, for callers that hold the form (the point-to-point path,
// whose receive may complete after the program freed the datatype): `count` elements at
// `typed` (device memory) to or from the packed stream at `packed` (host or device memory).
// nullopt: the module could not (nothing written); otherwise MPI_SUCCESS or the call's error.
// Whether c's program is on the device (uploaded now if not yet): a module that cannot upload
// (a runtime without a usable device) runs no kernels, so callers that must commit to the
// kernels before the data arrives (a receive) ask this first.
bool device_ready(const device::ModuleTable& m, Canon& c);
std::optional<int> device_kernels(const device::ModuleTable& m, Canon& c, bool to_packed, void* typed, int64_t count,
                                  char* packed);

}  // namespace hier::dtype
