// Point-to-point messages of non-contiguous datatypes whose buffer is device memory, packed and
// unpacked by the GPU module's kernels (TEMPI's idea): the sender packs on the device and only
// the packed bytes cross to host memory; the receiver takes the packed bytes and unpacks them
// on the device. On the wire these are the host engine's packed messages (MPI_BYTE, the bytes
// of the type signature: dtype/p2p.hpp), so either side may be libhier's packing, the MPI's
// own handling, or host memory. The MPI always gets host memory here, GPU-aware or not: a
// GPU-aware MPI would otherwise walk the device layout by its own means, the slow part TEMPI
// measured. core/dispatch_p2p.hpp sends and receives the staged bytes through its own dispatch
// (so the progress rules of libhier's nonblocking collectives still apply).
#pragma once

#include <mpi.h>

#include <cstdint>

#include "device/module.hpp"
#include "dtype/canon.hpp"
#include "dtype/staging.hpp"

namespace hier::dtype {

struct DeviceMessage {
  const device::ModuleTable* module = nullptr;
  CanonRef canon;
  Staging stage;   // host memory: the packed bytes
  int bytes = 0;   // count * size
  explicit operator bool() const { return stage.p != nullptr; }
};

// A message libhier packs on the device: `count` elements of t at `buf`, device memory, a type
// with an exact form that is not already contiguous bytes, and the module loaded (`m`). For a
// send the packed bytes are in the staging buffer when this returns. Empty: not taken (the
// staged path or the MPI has the call; nothing was sent or written).
DeviceMessage device_message(const device::ModuleTable& m, const void* buf, int64_t count, MPI_Datatype t, bool send);

// A completed receive of `msg` (its status and error as the MPI gave them): what arrived is
// unpacked into `buf` (count elements), by the kernels when the whole message came, else
// through a host copy of the buffer's span. Releases the staging buffer either way.
void device_land(DeviceMessage& msg, int64_t count, void* buf, const MPI_Status& st, int err);

// Releases the staging buffer of a message that was not sent or received.
void device_release(DeviceMessage& msg);

}  // namespace hier::dtype
