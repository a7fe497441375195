// Non-contiguous point-to-point: pack -> send contiguous bytes -> receive bytes -> unpack.
// The wire carries MPI_BYTE; both MPIs keep a receive's status in bytes, so MPI_Get_count,
// MPI_Get_elements, MPI_Probe and truncation behave exactly as if the derived type had been
// sent. Each returns nullopt when the call goes to the MPI unchanged: predefined or contiguous
// types, types without an exact canonical form, MPI_PROC_NULL, messages beyond INT_MAX bytes,
// or when the planner prefers the MPI's own handling.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>

namespace hier::dtype {

std::optional<int> send(const void* buf, int64_t count, MPI_Datatype t, int dest, int tag, MPI_Comm comm);
std::optional<int> isend(const void* buf, int64_t count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
                         MPI_Request* req);
std::optional<int> recv(void* buf, int64_t count, MPI_Datatype t, int source, int tag, MPI_Comm comm,
                        MPI_Status* status);
std::optional<int> irecv(void* buf, int64_t count, MPI_Datatype t, int source, int tag, MPI_Comm comm,
                         MPI_Request* req);
std::optional<int> sendrecv(const void* sbuf, int64_t scount, MPI_Datatype stype, int dest, int stag, void* rbuf,
                            int64_t rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm,
                            MPI_Status* status);

}  // namespace hier::dtype
