// MPI's predefined datatypes and operations as the reduction kernels' element types and ops
// (device/reduce.hpp). Named types map by their size and signedness (MPI_INT and MPI_INT32_T are
// different handles of one element type); anything else (derived types, MPI_MINLOC, user ops,
// 16-bit floats for now) has no kernel.
#pragma once

#include <mpi.h>

#include <optional>

#include "device/reduce.hpp"

namespace hier::device {

std::optional<ElemType> elem_type_of(MPI_Datatype t);
std::optional<ReduceOp> reduce_op_of(MPI_Op op);

}  // namespace hier::device
