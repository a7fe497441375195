// Whether a communicator's collectives may run host schedules, decided alike on every rank.
//
// A rank cannot see the other ranks' buffers, and a hierarchical collective deadlocks if one
// rank runs libhier's schedule while another passes the call to the MPI. So the choice must not
// depend on a rank's own buffers. libhier agrees once per communicator, with one PMPI_Allreduce,
// on "a GPU runtime is loaded in some rank's process": if so, every rank leaves that
// communicator's collectives to the (GPU-aware) MPI, whatever its buffers; if not, none of them
// can hold device memory and the host schedules are safe. The agreement runs at the first call
// that libhier might rewrite (exec::may_rewrite: the same answer on every rank, from arguments
// all ranks share), never on calls that pass through below the planner's windows. A runtime
// loaded later (after the agreement) is handled by the caller: a rank that then finds a device
// buffer stages it through the MPI instead of touching it (core/dispatch_coll.hpp).
#pragma once

#include <mpi.h>

namespace hier::device {

// True: host schedules allowed on `comm`; false: leave its collectives to the MPI. Collective
// over `comm` on the first call for it (the answer is kept as an attribute, so a duplicate
// agrees again); intercommunicators and one-rank communicators answer false without talking.
bool host_schedules_agreed(MPI_Comm comm);

}  // namespace hier::device
