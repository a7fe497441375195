// The level communicators of one user communicator, built once (collectively) and freed with
// it. All are derived from libhier's duplicate of it (exec::Context::internal): libhier's
// traffic never runs on the user's.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "config/config.hpp"
#include "shm/segment.hpp"
#include "topo/shape.hpp"

namespace hier::topo {

struct Levels {
  Shape shape;
  int rank = 0;  // in the user communicator
  int size = 0;

  // Cartesian view: step[j] holds the ranks that differ only in coordinate c_j (rank there = c_j).
  // step[k] (k = shape.nlevels()-1) is the cross-node communicator.
  std::vector<MPI_Comm> step;
  // Two-level view (always, when hierarchical): my node (rank there = local index, or the
  // position c_0..c_{k-1} when cartesian) and the node leaders (local 0; MPI_COMM_NULL elsewhere).
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm leaders = MPI_COMM_NULL;
  MPI_Comm cross = MPI_COMM_NULL;  // cartesian: ranks with my node position, one per node
  // The duplicate of the user communicator the levels were made from (owned by the caller,
  // exec::Context), for libhier's own agreements (exec/prepare.cpp): what a schedule-cache miss
  // acquired on every rank, before any rank depends on another.
  MPI_Comm internal = MPI_COMM_NULL;

  // HIER_SHM: a shared-memory segment (shm/segment.hpp) per level communicator whose members
  // share memory, on every rank or on none (agreed when built); the schedule's steps marked
  // Via::Shm run on them.
  std::vector<std::pair<MPI_Comm, std::unique_ptr<shm::Segment>>> segments;
  shm::Segment* segment(MPI_Comm c) const {
    for (const auto& [comm, seg] : segments)
      if (comm == c) return seg.get();
    return nullptr;
  }

  Levels() = default;
  Levels(const Levels&) = delete;
  Levels& operator=(const Levels&) = delete;
  ~Levels();

  long owned_count() const { return static_cast<long>(owned_.size()); }
  int my_node() const { return shape.node_of[rank]; }

 private:
  friend std::unique_ptr<Levels> build_levels(MPI_Comm, const config::Config&, int*, int*);
  std::vector<MPI_Comm> owned_;  // each communicator once (some views share one)
};

// Collective over `internal`, a duplicate of the user's communicator that the caller made and
// frees after the levels (ranks are the user communicator's). Returns null where there is
// nothing hierarchical to do (one level, levels that split nothing, not nested), and also, on
// every rank alike, when any rank failed to create its level communicators (`*failed` is then
// 1, or 2 on the rank that failed): the ranks agree on that before returning, so the
// communicator runs flat everywhere instead of hanging on the rank that lacks a communicator.
// Every communicator made here returns errors (MPI_ERRORS_RETURN): the executor raises them on
// the user's communicator, through its error handler. `any_flag`, when given, is this rank's
// value (>= 0) in and, on a hierarchical result, the largest of the ranks' values out: carried
// by the same agreement (the executor's GPU state, exec/context.cpp), so it costs no collective
// of its own.
std::unique_ptr<Levels> build_levels(MPI_Comm internal, const config::Config& cfg, int* failed = nullptr,
                                     int* any_flag = nullptr);

}  // namespace hier::topo
