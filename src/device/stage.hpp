// Host copies of device buffers made by the MPI itself, never by libhier's CPU code: the rare
// path of a rank that must take part in a host schedule its communicator already agreed on
// (exec::Context::gpu_anywhere) although it now holds device memory (a GPU runtime loaded late).
// The copies are the MPI's own PMPI_Pack into a host buffer and PMPI_Unpack out of it: a
// GPU-aware MPI reads and writes device memory that way, no message is sent (so no
// self-communicator traffic that two threads could cross), and the layout of a derived type is
// kept (holes untouched).
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
