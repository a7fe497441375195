// Host copies of device buffers made by the MPI itself, never by libhier's CPU code: the rare
// path of a rank that must take part in a host schedule its communicator already agreed on
// (exec::Context::gpu_anywhere) although it now holds device memory (a GPU runtime loaded late).
// The copies are PMPI_Sendrecv to self on a private duplicate of MPI_COMM_SELF: a GPU-aware MPI
// moves device data that way, and the layout of a derived type is kept (holes untouched).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

namespace hier::device {

class HostStage {
 public:
  // Copies n elements of `t` at `dev` into new host memory; host() is the address of element 0.
  HostStage(const void* dev, int64_t n, MPI_Datatype t);
  int rc() const { return rc_; }
  void* host() const { return host_; }
  // Copies the n elements back to `dev`.
  int copy_back(void* dev) const;

 private:
  std::unique_ptr<char[]> mem_;
  void* host_ = nullptr;
  int64_t n_;
  MPI_Datatype t_;
  int rc_ = MPI_SUCCESS;
};

}  // namespace hier::device
