// The type signature's element type: what the MPI standard makes equal on every rank of a
// collective (the type signature of the data sent and received), as opposed to the layout,
// which ranks may choose freely (MPI_FLOAT x 2n on one rank, a contiguous type of 2 floats x n
// or a strided type with gaps on another). Decisions that every rank must take alike read this
// (exec/coll_quant.cpp: whether a call may be quantized), never the rank's own handle or layout.
#pragma once

#include <mpi.h>

namespace hier::dtype {

// The one predefined type that every basic element of `t`'s type signature has (MPI_FLOAT for
// MPI_FLOAT, its duplicates, contiguous, vector, indexed, resized and struct types built only
// of floats, whatever their gaps), or MPI_DATATYPE_NULL: more than one basic type, an empty
// signature, or a constructor not decoded (Fortran f90 types). Members of zero length do not
// count. Cached on the canonical form of a committed type (dtype::Canon::elem); computed from
// PMPI_Type_get_envelope / get_contents otherwise. Never communicates.
MPI_Datatype signature_elem(MPI_Datatype t);

// The same, always walked (the canonicalizer's cache fills from it).
MPI_Datatype signature_elem_walk(MPI_Datatype t);

}  // namespace hier::dtype
