// libhier's hierarchical collectives, as the coll dispatch calls them. Each returns std::nullopt
// when the call must go to PMPI unchanged (HIER_ALGO=flat, below the crossover, no hierarchy,
// or anything libhier cannot do exactly: non-commutative ops, intercommunicators, ...), and
// otherwise the MPI return code of the hierarchical run. `req` (where present): the nonblocking
// form (MPI_Iallreduce, ...): the same decision and schedule, started as a request
// (exec/request.hpp) whose handle lands in *req.
#pragma once

#include <mpi.h>

#include <optional>

namespace hier::exec {

std::optional<int> allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<int> reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                          MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<int> reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                                        MPI_Op op, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<int> reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type,
                                  MPI_Op op, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<int> allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<int> allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                              const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<int> bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
    MPI_Request* req = nullptr);
std::optional<int> barrier(MPI_Comm comm, MPI_Request* req = nullptr);
std::optional<int> alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm,
    MPI_Request* req = nullptr);

}  // namespace hier::exec
