// The level steps that run through a level communicator's shared-memory segment (Via::Shm;
// shm/segment.hpp), each a non-blocking state machine (shm::Step) of rounds: every writer copies
// its part of the round into its slot and raises its ready flag; every reader then reads what it
// needs straight from the slots and raises its done flag. Data larger than a slot takes several
// rounds, double-buffered.
//
// Reductions fold in one fixed order per element, so results are the same bits on every rank:
//   reduce-scatter: member i's piece is its own, then the pieces of i-1, i-2, ... around the
//     members: the order of the direct exchange (exec/direct.hpp), so that the two give the same
//     bits; the MPI's own reduce-scatter may order otherwise (floating point: within the usual
//     reassociation bound of it);
//   allreduce: every member folds members 0, 1, ..., p-1, each the same bits;
//   reduce: the root's own, then root-1, root-2, ...
// Commutative operations only (start() declines the others: the step then goes to the MPI).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "exec/typed.hpp"
#include "sched/ir.hpp"
#include "shm/step.hpp"

namespace hier::exec {

struct ShmArgs {
  const char* src = nullptr;  // the step's source (in place: null)
  char* dst = nullptr;
  bool in_place = false;
  int64_t count = 0;
  int root = 0;
  std::vector<int64_t> counts, displs;  // ReduceScatter (counts), Allgatherv (both)
  const TypeInfo* info = nullptr;       // null: units are bytes; the caller's (a request's) until the step completes
  MPI_Op op = MPI_OP_NULL;
  // The step's form (sched::Step::single, the plan's choice: model::shm_single): single copy
  // where the segment allows it (Segment::cma(); else copy-in, counted in the report), copy-in
  // when false. Benchmarks and tests set it to compare the two forms.
  bool single_copy = false;
};

// A step the plan routed through a segment that runs as messages instead: no segment on its
// communicator, or shm_start declined its inputs. Counted in the report's shm section.
enum class ShmFallback { NoSegment, Declined };
void note_shm_fallback(ShmFallback why);

// This process's counts of the report's shm section, summed over the kinds (for the tests).
struct ShmCounts {
  uint64_t steps = 0, single = 0;             // steps run through a segment; of which single copy
  uint64_t single_refused = 0, not_dense = 0;  // single copy planned, run copy-in
  uint64_t no_segment = 0, declined = 0;      // routed through a segment, run as messages
};
ShmCounts shm_counts();

// Starts `kind` on `seg`; null when the transport declines these inputs (an operation that is
// not commutative, an element larger than a slot): inputs equal on every member, so every
// member declines alike and runs the step as messages instead.
std::unique_ptr<shm::Step> shm_start(sched::Kind kind, shm::Segment& seg, const ShmArgs& a);

// Whether a step shm_start made reads its peers' buffers directly (single copy) rather than
// copying through the segment's slots (HIER_TRACE names the transport).
bool shm_single_copy(const shm::Step& st);

}  // namespace hier::exec
