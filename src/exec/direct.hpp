// Collectives on one level communicator that libhier runs itself, by direct exchange between
// the members, where the MPIs' own algorithms are measurably slow for that shape. Each comes as
// a start that posts nonblocking operations into a Pending, so that a pipelined wave can run it
// next to other steps, and a blocking form (start, then complete).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "exec/device_steps.hpp"
#include "exec/scratch.hpp"
#include "exec/typed.hpp"
#include "shm/step.hpp"

namespace hier::exec {

// A level step started nonblocking: its requests, the count arrays that MPI reads until they
// complete, and what remains to do once they have (null: nothing).
struct Pending {
  std::vector<MPI_Request> reqs;
  std::vector<int> counts, displs;
  std::vector<int> rcounts, rdispls;  // Alltoallv's receive side
  std::function<int(Pending&)> finish;
  std::unique_ptr<shm::Step> shm;  // a step through shared memory (exec/shm_steps.hpp): no requests
  // Runs `finish` and waits for every request, also after an error (no request outlives the
  // step); returns the first error.
  int complete();
};

// Reduce-scatter: member i ends with the reduction of every member's piece i (counts[i]
// elements of t, pieces back to back in src) in dst. Every member sends each peer its piece at
// once and reduces the p-1 pieces it receives into its own in one fixed order (from me-1, me-2,
// ... around the ring), so each element is reduced in exactly one place, in one order.
// Commutative ops only. src and dst must not overlap; tmp holds p-1 received pieces.
// dev (device bindings, exec/device_steps.hpp): src, dst and tmp are device memory of a dense
// type; the copy and the reductions are the module's kernels, done when the step completes.
int reduce_scatter_direct_start(const char* src, char* dst, const std::vector<int>& counts, const TypeInfo& t,
                                MPI_Op op, MPI_Comm comm, Scratch& tmp, Pending& out, const DeviceOps* dev = nullptr);
int reduce_scatter_direct(const char* src, char* dst, const std::vector<int>& counts, const TypeInfo& t, MPI_Op op,
                          MPI_Comm comm, Scratch& tmp, const DeviceOps* dev = nullptr);

// Scratch bytes reduce_scatter_direct_start takes from `tmp` for member `me`.
int64_t reduce_scatter_direct_bytes(const std::vector<int>& counts, int me, const TypeInfo& t);

// Allgatherv as an Allgather of pieces padded to the largest one, through tmp, then copied into
// place: for MPIs whose Allgatherv is far slower than their Allgather (MPICH 4.0.2). `dst`
// holds the pieces at displs (elements of t, or bytes when t is null: MPI_BYTE); my piece is
// read from `src`, or from its place in dst when in_place. dev: as for the reduce-scatter.
int allgatherv_padded_start(const char* src, bool in_place, char* dst, const std::vector<int>& counts,
                            const std::vector<int>& displs, const TypeInfo* t, MPI_Comm comm, Scratch& tmp,
                            Pending& out, const DeviceOps* dev = nullptr);
// Scratch bytes allgatherv_padded(_start) takes from `tmp`.
int64_t allgatherv_padded_bytes(const std::vector<int>& counts, const TypeInfo* t);
int allgatherv_padded(const char* src, bool in_place, char* dst, const std::vector<int>& counts,
                      const std::vector<int>& displs, const TypeInfo* t, MPI_Comm comm, Scratch& tmp,
                      const DeviceOps* dev = nullptr);

}  // namespace hier::exec
