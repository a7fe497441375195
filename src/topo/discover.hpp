// Finds, for a communicator, which group every rank belongs to at each configured level.
// Collective over `comm`; uses PMPI_* only (never re-enters libhier's wrappers).
#pragma once

#include <mpi.h>

#include "config/config.hpp"
#include "topo/shape.hpp"

namespace hier::topo {

// `comm` must be an internal duplicate of the user's communicator (the traffic runs on it).
// Levels without a size are detected: "node" is MPI_COMM_TYPE_SHARED, any other name asks
// hwloc (topo/hwloc_domains.hpp) and is dropped, with a warning, where it finds nothing.
// HIER_LEVELS=auto means "node" plus whatever hwloc finds inside it.
// `physical`: also record every rank's shared-memory domain (GroupTable::physical), which the
// planner's auto mode uses to tell real nodes from node:N fakes on one machine.
GroupTable discover(MPI_Comm comm, const config::Config& cfg, bool physical);

}  // namespace hier::topo
