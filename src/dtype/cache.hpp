// Canonical forms cached on the datatype itself: an MPI attribute under a type keyval, released
// by the keyval's delete callback when the type is freed and shared (copy callback) with
// MPI_Type_dup'ed types. Never a map keyed by handle: handles are reused after MPI_Type_free.
#pragma once

#include <mpi.h>

#include "dtype/canon.hpp"

namespace hier::dtype {

// After a successful PMPI_Type_commit: canonicalize and attach (once per type).
void on_commit(MPI_Datatype t);

// The canonical form of a committed type; null for predefined types and for types committed
// while libhier was not intercepting (callers pass those through).
CanonRef lookup(MPI_Datatype t);

// The same without taking a reference: valid while the type is (the attribute holds one), i.e.
// for the duration of the MPI call that was handed `t`. For deciding; take a CanonRef (retain)
// to keep it beyond the call.
Canon* peek(MPI_Datatype t);

}  // namespace hier::dtype
