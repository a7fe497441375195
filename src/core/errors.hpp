// Errors of libhier's own making, delivered the way the MPI delivers its own: through the error
// handler of the communicator the call was made on (MPI_ERRORS_ARE_FATAL stops the job,
// MPI_ERRORS_RETURN returns the code), with MPI error classes.
#pragma once

#include <mpi.h>

namespace hier::core {

// A hierarchical call that failed: its steps ran on libhier's level communicators, which return
// their errors (topo/levels.hpp), so the user's communicator's handler has not seen it yet.
// Returns rc.
int raise_on(MPI_Comm comm, int rc);

// An error of libhier's own making on a call it left to the MPI (core::Outcome::own: a staging
// copy the GPU runtime refused, no memory for it): one WARN line names the call and the error
// (the first few times), then raise_on. Returns rc.
int raise_own(MPI_Comm comm, int rc, const char* function);

// Inside a catch block of a generated wrapper: the code for the exception in flight (std::bad_alloc:
// MPI_ERR_NO_MEM, anything else: MPI_ERR_INTERN), logged once and raised on `comm` (MPI_COMM_NULL:
// a call with no communicator, raised on MPI_COMM_SELF as MPI-4 does for such errors).
// No C++ exception ever crosses an extern "C" wrapper.
int on_exception(MPI_Comm comm, const char* function);

}  // namespace hier::core
