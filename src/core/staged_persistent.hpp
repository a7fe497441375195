// The MPI's own persistent collectives on host copies of device buffers: a persistent collective
// that libhier leaves to an MPI that is not GPU-aware (the planner leaves it flat) runs as the
// MPI's MPI_<X>_init on host copies kept with the request (core/dispatch_coll.hpp). The program
// holds the MPI's own request; libhier refreshes the copies from the device at each MPI_Start
// (start) and copies the written ones back when a completion call completes that start
// (completed). libhier's own persistent collectives keep their copies through
// exec::wrap_persistent instead.
#pragma once

#include <mpi.h>

#include <atomic>
#include <functional>

namespace hier::core::staged_persistent {

// Kept requests, freed ones still running included: the completion calls look only while any.
extern std::atomic<int> g_kept;
inline bool any() { return g_kept.load(std::memory_order_relaxed) != 0; }

// Keeps the MPI's persistent request h: `before` runs ahead of each MPI_Start of it, `after`
// once each start completed without error (both return an MPI code).
void keep(MPI_Request h, std::function<int()> before, std::function<int()> after);
bool kept(MPI_Request h);
// MPI_Start of a kept request: `before`, then the MPI's start.
int start(MPI_Request* h);
// The start of h seen complete by a completion call (ok: without error): `after` where ok.
// Nothing for a request that is not kept, or not started (a completion call on an inactive one).
void completed(MPI_Request h, bool ok);
// MPI_Request_free of a kept request: an inactive one is freed; a started one is freed once its
// start completed and its copies went back (checked by later completion calls, at the latest at
// MPI_Finalize), as the standard lets the operation of a freed request complete later.
int free(MPI_Request* h);
// Completes the freed requests whose start completed.
void progress_freed();

}  // namespace hier::core::staged_persistent
