// Host copies of device buffers, never made by libhier's CPU code: for a rank that runs a host
// schedule (exec::Context::device_to_mpi is false) with device memory in its buffers.
// - Through the GPU runtime (device/runtime_copy.hpp), the usual way: the whole span of the
//   buffer, from its first to its last touched byte, in one copy each way. The holes of a
//   derived type travel too and are written back with the bytes they had when the call began.
// - Through the MPI's own pack and unpack, where the runtime cannot copy and the MPI is GPU-aware
//   (an MPI that is not would read device memory on the host: that is an error instead). It moves
//   device data that way and keeps a derived type's layout (holes untouched); no message is
//   sent, so no self-communicator traffic that two threads could cross.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

#include "device/pointer.hpp"

namespace hier::device {

// The bytes n elements of t span, from the first to the last touched byte; *lb: the first
// touched byte relative to element 0. -1: the MPI rejected the type.
int64_t span_bytes(MPI_Datatype t, int64_t n, MPI_Aint* lb);

// Where n elements of t at p live: the kind of their first touched byte. Not p's own: a derived
// type may start after p (or before it), and p may then lie outside the allocation, where the
// runtime answers "host memory". Host without a runtime (one atomic load).
MemKind classify_typed(const void* p, int64_t n, MPI_Datatype t);

class HostStage {
 public:
  // Copies n elements of `t` at `dev` into new host memory; host() is the address of element 0.
  // mpi_packs_device: the MPI is GPU-aware, so its pack may stand in for a copy the runtime
  // refuses; otherwise such a refusal is the stage's error (MPI_ERR_OTHER), never a host read.
  HostStage(const void* dev, int64_t n, MPI_Datatype t, bool mpi_packs_device);
  int rc() const { return rc_; }
  void* host() const { return host_; }
  // Copies the n elements back to `dev`.
  int copy_back(void* dev) const;
  // Copies them from `dev` again (a persistent collective's host copies, at every MPI_Start).
  int refresh(const void* dev);

 private:
  std::unique_ptr<char[]> mem_;
  void* host_ = nullptr;
  int64_t n_;
  MPI_Datatype t_;
  size_t span_ = 0;         // bytes from the first to the last touched byte
  MPI_Aint lb_ = 0;         // the first touched byte, relative to element 0
  bool by_runtime_ = false; // copied by the GPU runtime (else by the MPI's pack/unpack)
  int rc_ = MPI_SUCCESS;
};

}  // namespace hier::device
