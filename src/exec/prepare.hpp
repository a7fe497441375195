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
#include "model/plan.hpp"

namespace hier::exec {

struct Prepared {
  Context* ctx = nullptr;
  model::Plan plan;
  int64_t elem_size = 1;  // the call's (model::Call::elem_size): the plan's unit for its shm steps
};

// The cheap first test, before any type decoding or communicator lookup (this runs on every
// call, small ones included): whether `count` elements of `type` could be rewritten at all under
// HIER_ALGO and the planner's windows. The full checks follow in prepare().
bool may_rewrite(config::Coll coll, MPI_Datatype type, int64_t count);

// Null when the call goes flat. Every input must be the same on every rank of `comm` (see
// model/plan.hpp): the context is built collectively on the first call that gets this far.
// `elem_size`: bytes per unit of the schedule (the datatype's size; 1 for byte schedules).
// `nonblocking`: for a request (exec/request.hpp); a blocking call first completes the requests
// outstanding on the communicator (their level steps must all be issued before its own).
// `quantizable`: the op and the values allow a quantized schedule (model::Call::quantizable).
std::optional<Prepared> prepare(config::Coll coll, int64_t bytes, MPI_Comm comm, int64_t elem_size = 1,
                                bool nonblocking = false, bool quantizable = false);

// The schedule for `key`. A hit in the context's cache is the whole cost on the hot path. On a
// miss (the same calls miss on every rank: sched/cache.hpp) the schedule is built (and printed
// at TRACE) and `acquire` reserves everything the run will need (scratch, staging, the direct
// steps' buffers), so that nothing is allocated once the ranks depend on each other; then the
// ranks agree, with one small allreduce on the context's internal communicator, that every one
// of them succeeded. Null when any rank failed: the call then goes to the MPI on every rank (and
// the next call with this key tries again, on every rank alike).
// `variant` picks this call's form of a schedule that has two on this rank (the root of a
// reduce: in place or not); `both`: build and acquire both forms at the miss, so that the other
// one never needs anything later, when the peers hit and would not agree again.
using Build = std::function<sched::Schedule(int variant)>;
using Acquirer = std::function<bool(const sched::Schedule&)>;
std::shared_ptr<const sched::Schedule> schedule(Prepared& p, const sched::Key& key, const Build& build, const Acquirer& acquire,
                                int variant = 0, bool both = false);

// Counts a hierarchical call that ran pipelined in `chunks` chunks, for the finalize report's
// "pipeline" section (per collective: calls and chunks).
void note_pipelined(config::Coll coll, int chunks);

// Whether `op` is one of MPI's predefined operations (bitwise commutative on every type it
// accepts, so PMPI_Allreduce gives one result everywhere).
bool predefined_op(MPI_Op op);

// Reductions libhier may reorder: a valid commutative op other than MPI_REPLACE / MPI_NO_OP, on
// a committed type with positive size and extent.
bool reorderable(MPI_Op op, const TypeInfo& t);

// The size of an intracommunicator; 0 for MPI_COMM_NULL or an intercommunicator (which the
// hierarchical collectives leave to PMPI).
int intracomm_size(MPI_Comm comm);

}  // namespace hier::exec
