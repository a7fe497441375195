// libhier's hierarchical collectives, as the coll dispatch calls them. Each returns std::nullopt
// when the call must go to PMPI unchanged (HIER_ALGO=flat, below the crossover, no hierarchy,
// or anything libhier cannot do exactly: non-commutative ops, intercommunicators, ...), and
// otherwise the MPI return code of the hierarchical run. `req` (where present): the nonblocking
// form (MPI_Iallreduce, ...): the same decision and schedule, started as a request
// (exec/request.hpp) whose handle lands in *req. The code comes with the algorithm that ran
// (Ran::algo), which the coll dispatch reports.
#pragma once

#include <mpi.h>

#include <optional>

#include "diag/stats.hpp"

namespace hier::exec {

// What a hierarchical call did: its MPI return code, and the algorithm it ran for the report
// (Hier; HierInt8 / HierInt4 when quantized).
struct Ran {
  Ran(int code, diag::AlgoTag tag = diag::AlgoTag::Hier) : rc(code), algo(tag) {}
  int rc;
  diag::AlgoTag algo;
};

std::optional<Ran> allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<Ran> reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                          MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<Ran> reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                                        MPI_Op op, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<Ran> reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type,
                                  MPI_Op op, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<Ran> allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<Ran> allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                              const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<Ran> bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<Ran> barrier(MPI_Comm comm, MPI_Request* req = nullptr);
std::optional<Ran> alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm,
    MPI_Request* req = nullptr);

}  // namespace hier::exec
