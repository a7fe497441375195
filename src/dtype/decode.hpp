// MPI datatype -> strided-block tree, through PMPI_Type_get_envelope / get_contents only.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>

#include "dtype/ir.hpp"

namespace hier::dtype {

// The typemap of one element of `t` (offsets relative to the buffer address), or nullopt with
// the reason in `why` when it cannot be represented exactly (unknown combiner, large-count
// constructor, a predefined type with an unknown layout, too many nodes).
// `empty_parts` (optional) is set when some constructor had zero-length members (zero counts,
// block lengths or zero-size types): the MPIs handle those with quirks (see canon.cpp).
std::optional<Seq> decode(MPI_Datatype t, std::string& why, bool* empty_parts = nullptr);

// Whether `t` is a predefined (named) datatype.
bool is_named(MPI_Datatype t);

}  // namespace hier::dtype
