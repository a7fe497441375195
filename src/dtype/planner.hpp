// Whether a non-contiguous send or receive is faster packed by libhier (pack -> contiguous
// bytes -> unpack) than left to the MPI's own datatype handling. Cost model: dtype/tune.hpp.
#pragma once

#include <cstdint>

#include "dtype/canon.hpp"

namespace hier::dtype {

struct TuneModel;
struct Size {
  double bytes, blocks;  // packed bytes, contiguous runs
};
// The point-to-point rule under model m (policy aside): does packing a message of this size pay?
bool p2p_pays(const TuneModel& m, const Size& s);

// Point-to-point: packing + contiguous message + unpacking vs the MPI's derived-type message.
// Both sides use the same model, so for equal layouts they decide alike (either way the bytes
// on the wire are the same, so a mixed decision is still correct).
bool plan_pack_send(const Canon& c, int64_t count);
bool plan_pack_recv(const Canon& c, int64_t count);
// MPI_Pack / MPI_Unpack: the engine vs PMPI_Pack / PMPI_Unpack.
bool plan_engine_pack(const Canon& c, int64_t count);
bool plan_engine_unpack(const Canon& c, int64_t count);

// Device buffers (dtype/device_p2p.hpp, dtype/device_pack.hpp): whether `count` elements of c in
// device memory are packed (to_packed) or unpacked by the GPU module's kernels, the packed bytes
// crossing to host memory in one copy, rather than the alternative: an MPI that is not GPU-aware
// gets host copies of the span (staged: one copy each way that data moves, plus the host
// engine), a GPU-aware one the device layout itself. Rates: TuneModel::Device.
bool plan_device_kernels(const Canon& c, int64_t count, bool to_packed, bool gpu_aware);
// The same rule on a model and a message (tests): span = bytes from the first touched byte to
// the last.
struct DeviceCase {
  Size size;
  double span;
  bool to_packed, gpu_aware;
};
bool device_kernels_pay(const TuneModel& m, const DeviceCase& d);

}  // namespace hier::dtype
