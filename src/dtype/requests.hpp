// libhier-owned requests: the MPI requests of packed MPI_Isend / MPI_Irecv, whose staging
// buffer must be released (and, for receives, unpacked into the user's layout) when the MPI
// completes them. The user holds the MPI's own request handle, so MPI_Cancel, MPI_Probe and
// the status fields work unchanged; libhier only adds work after completion.
//
// Entries are keyed by the request handle. A handle is unique while its request is active
// (except shared handles of sends that completed at once, which the MPIs return: several
// entries then have one key, all complete), and every completion call takes the entry out
// *before* calling the MPI (and puts it back if the request did not complete), so a handle
// value reused by the MPI after completion can never meet a stale entry.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <optional>

#include "dtype/canon.hpp"
#include "dtype/device_p2p.hpp"
#include "dtype/staging.hpp"

namespace hier::dtype {

// What a truncated receive into a derived type leaves in the buffer: Open MPI 4.1 delivers
// the part that fits, MPICH 4.0 (ch4:ucx) nothing. libhier's staged receives do the same.
constexpr bool truncated_data_lands() {
#if defined(OMPI_MAJOR_VERSION)
  return true;
#else
  return false;
#endif
}

// The bytes a completed staged receive lands in the user's buffer (its status and error as the
// MPI gave them): none when cancelled or failed, what fits when truncated where the MPI lands it.
MPI_Count landed_bytes(const MPI_Status& st, int err);

// Number of owned requests: the completion calls stay pure passthrough while it is zero.
extern std::atomic<int> g_owned;
inline bool any_owned() { return g_owned.load(std::memory_order_relaxed) != 0; }

void own_send(MPI_Request r, Staging s);
void own_recv(MPI_Request r, Staging s, CanonRef c, void* buf, int64_t count);
// A receive into a host copy of a device buffer's span (core/device_p2p.hpp): at completion the
// GPU runtime copies the first `span` bytes of s back to `device` (device/runtime_copy.hpp).
void own_device_recv(MPI_Request r, Staging s, void* device, size_t span);
// A receive of packed bytes for device memory (dtype/device_p2p.hpp): unpacked by the GPU
// module's kernels into `buf` at completion.
void own_device_message(MPI_Request r, DeviceMessage msg, void* buf, int64_t count);

// The completion family. Each returns nullopt when none of the requests is owned (the caller
// forwards to the MPI unchanged); otherwise it calls the MPI itself and finishes the owned
// requests that completed.
std::optional<int> wait(MPI_Request* r, MPI_Status* st);
std::optional<int> test(MPI_Request* r, int* flag, MPI_Status* st);
std::optional<int> waitall(int n, MPI_Request* r, MPI_Status* st);
std::optional<int> testall(int n, MPI_Request* r, int* flag, MPI_Status* st);
std::optional<int> waitany(int n, MPI_Request* r, int* index, MPI_Status* st);
std::optional<int> testany(int n, MPI_Request* r, int* index, int* flag, MPI_Status* st);
std::optional<int> waitsome(int n, MPI_Request* r, int* outcount, int* indices, MPI_Status* st);
std::optional<int> testsome(int n, MPI_Request* r, int* outcount, int* indices, MPI_Status* st);
// MPI_Request_free of an owned request: the request is kept (detached) and completed by libhier
// later, since its staging buffer must outlive it.
std::optional<int> request_free(MPI_Request* r);
// Completes detached requests that are done (called from the p2p and request families).
void progress_detached();

}  // namespace hier::dtype
