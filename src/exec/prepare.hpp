// The path every hierarchical collective shares: configuration, planner, context (levels),
// schedule cache, TRACE printing.
#pragma once

#include <mpi.h>

#include <functional>
#include <optional>

#include "config/config.hpp"
#include "exec/context.hpp"
#include "exec/typed.hpp"
#include "sched/cache.hpp"
#include "sched/planner.hpp"

namespace hier::exec {

struct Prepared {
  Context* ctx = nullptr;
  sched::Plan plan;
};

// The cheap first test, before any type decoding or communicator lookup (this runs on every
// call, small ones included): whether `count` elements of `type` could be rewritten at all under
// HIER_ALGO and the planner's windows. The full checks follow in prepare().
bool may_rewrite(config::Coll coll, MPI_Datatype type, int64_t count);

// Null when the call goes flat. Every input must be the same on every rank of `comm` (see
// sched/planner.hpp): the context is built collectively on the first call that gets this far.
std::optional<Prepared> prepare(config::Coll coll, int64_t bytes, MPI_Comm comm);

// The schedule for `key` from the context's cache (built, and printed at TRACE, on a miss).
const sched::Schedule& schedule(Prepared& p, const sched::Key& key, const std::function<sched::Schedule()>& build);

// Counts a hierarchical call that ran pipelined in `chunks` chunks, for the finalize report's
// "pipeline" section (per collective: calls and chunks).
void note_pipelined(config::Coll coll, int chunks);

// Whether `op` is one of MPI's predefined operations (bitwise commutative on every type it
// accepts, so PMPI_Allreduce gives one result everywhere).
bool predefined_op(MPI_Op op);

// Reductions libhier may reorder: a valid commutative op other than MPI_REPLACE / MPI_NO_OP, on
// a committed type with positive size and extent.
bool reorderable(MPI_Op op, const TypeInfo& t);

}  // namespace hier::exec
