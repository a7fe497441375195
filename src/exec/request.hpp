// Nonblocking hierarchical collectives (MPI_Iallreduce, ...): a request runs the call's schedule,
// the same one the blocking call runs (same planner decision, same cache entry), through the
// executor's Machine in nonblocking mode: start a group of level steps, test it, start the
// next. The user holds an MPI generalized request (MPI_Grequest_start), which libhier completes
// when the schedule is done, so the MPI's own completion calls (mixed arrays, MPI_Request_free,
// statuses) work on it unchanged; they only need libhier to advance the schedules, which the
// request family's wrappers do (core/dispatch_request.hpp), as do the p2p wrappers, every
// collective call and, with HIER_PROGRESS=thread, a progress thread.
//
// Order of issue. Nonblocking collectives on one communicator match in the order each rank
// issues them, and the ranks advance their requests at different moments. So on one context
// (one user communicator, whose level communicators no other context shares) a request issues
// its next group only once every older request of that context has issued all of its groups:
// every rank issues level steps in one order (the order of the user's calls, which MPI makes
// the same everywhere), whichever request the program waits for first. A blocking call on the
// context first completes the requests outstanding there (drain), for the same reason.
//
// Memory. Each request runs on scratch of its own (RequestMemory, from the context's pool of
// finished requests' memory). Should that allocation fail, the request waits for the others on
// its context to complete and runs on the context's own scratch, which the schedule-cache miss
// reserved and every rank agreed on: no rank ever falls back alone.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <vector>

#include "config/config.hpp"
#include "exec/context.hpp"
#include "exec/executor.hpp"
#include "exec/typed.hpp"

namespace hier::exec {

// What the collective's entry point hands over: the schedule and everything the Binding points
// to, owned here for the request's lifetime.
struct CollRequest {
  config::Coll coll = config::Coll::Allreduce;
  Context* ctx = nullptr;
  std::shared_ptr<const sched::Schedule> sched;
  Binding b;
  TypeInfo t, st;                       // copies the Binding and the blocks refer to
  std::vector<int64_t> counts, displs;  // idem
  std::unique_ptr<Blocks> blocks;
  std::function<int()> before;          // runs at every start (packing the user's data)
  std::function<int()> after;           // runs once the schedule completed without error
  // Requests of the MPI's own that `before` started beside the schedule (HIER_QUANT_CHECK's
  // exact collective, exec/quant_call.cpp): the request completes only once they have too, so
  // that `after` may read their results. Tested, never waited for; emptied at completion.
  std::vector<MPI_Request> side;
  int side_rc = MPI_SUCCESS;

  // Set by the progress engine (request.cpp, persistent.cpp).
  std::unique_ptr<RequestMemory> mem;  // null: runs on the context's own memory
  std::unique_ptr<Machine> machine;
  MPI_Request handle = MPI_REQUEST_NULL;
  struct Extra* extra = nullptr;  // what the MPI's request keeps: the return code
  std::vector<MPI_Datatype> dups;  // derived datatypes held until completion
  MPI_Op held_op = MPI_OP_NULL;    // the user-defined op b.op, referenced until completion (hold_op)
  double t_start = 0;
  uint64_t trace_id = 0;  // HIER_TRACE: this start's async slice (0: none)
  int trace_fn = -1;      // the call that started it (-1: MPI_Start)
  struct Persistent* owner = nullptr;  // a persistent collective's: kept between starts
};

// Keeps the datatype of t usable until the request completes, even if the program frees it
// (as MPI allows right after the call): a derived type is duplicated.
void hold_type(CollRequest& r, TypeInfo& t);

// Keeps the user-defined op of r.b.op usable until the request completes (a persistent request:
// until it is freed), even if the program frees it meanwhile (MPI_Op_free, as MPI allows right
// after the call): r takes a reference, and defer_op_free holds back the MPI's free until the
// last reference is dropped. Predefined ops and MPI_OP_NULL take none. start_request calls it.
void hold_op(CollRequest& r);
// MPI_Op_free of `op` (core/dispatch_dtype.hpp): true when a request still holds op, so that the
// MPI's free is deferred to that request's completion (the caller sets the program's handle to
// MPI_OP_NULL and returns MPI_SUCCESS, as the MPI would); false when nothing holds it (the
// caller frees it now).
bool defer_op_free(MPI_Op op);

// The request's scratch (at least `scratch_bytes`) and the buffers reserve() takes for its
// schedule, with `info` as reserve() takes it. Null only when even the context's own memory
// (reserved at the schedule-cache miss) is missing, which cannot happen after an agreed miss.
char* request_scratch(CollRequest& r, int64_t scratch_bytes, const TypeInfo* info);

// Starts the request and gives the program its handle in *out. Returns an MPI code. Inside a
// PersistentInit scope (MPI_Allreduce_init, ...) it makes a persistent request instead: the
// schedule and memory stay with it, MPI_Start runs it.
int start_request(std::unique_ptr<CollRequest> r, MPI_Request* out);

// Persistent collectives (MPI 4.0: MPICH 4.0 has them; Open MPI 4.1 only as MPIX_*_init in an
// extension, which passes through). The program's handle is an inactive persistent request of
// the MPI's own (a send to MPI_PROC_NULL), so that the MPI's completion calls on an inactive
// one return at once, as they must; while started, the completion calls see the generalized
// request of the current start in its place (swap_in / swap_out).
struct PersistentInit {
  PersistentInit();
  ~PersistentInit();
};
bool persistent_init_scope();  // inside a PersistentInit on this thread
bool is_persistent(MPI_Request h);
int start_persistent(MPI_Request h);  // MPI_Start of one of libhier's persistent requests
int free_persistent(MPI_Request* h);  // MPI_Request_free of one
// At the deletion of ctx's communicator (MPI_Comm_free, its nonblocking requests drained): true
// when persistent requests made on it still exist, which keep the context; the last one's
// MPI_Request_free deletes it then (MPI: the object goes once no operation refers to it).
bool kept_by_persistent(Context* ctx);
// Whether persistent requests made on ctx still exist.
bool has_persistent(Context* ctx);
// Adds work around every start of persistent request h: `before` ahead of its own (at each
// MPI_Start), `after` behind its own (once each start completed without error). The collectives'
// dispatch refreshes and copies back the host copies of a rank's device buffers with them
// (core/dispatch_coll.hpp). MPI_ERR_REQUEST: h is not one of libhier's.
int wrap_persistent(MPI_Request h, std::function<int()> before, std::function<int()> after);
bool persistent_started();            // some persistent request is started and not yet seen complete
// Around a completion call on r[0..n): r's started persistent handles swapped for their
// current generalized requests in `tmp` (returned); after the call, swap_out puts the
// handles back (inactive where the start completed) and copies the other slots.
MPI_Request* swap_in(int n, MPI_Request* r, std::vector<MPI_Request>& tmp);
void swap_out(int n, MPI_Request* r, std::vector<MPI_Request>& tmp);

// Whether libhier has requests not yet complete (the completion calls then advance them).
bool requests_active();
// Whether only the program's own MPI calls advance them (requests outstanding and no progress
// thread): a blocking point-to-point call must then advance them while it waits (core/dispatch_p2p.hpp).
bool calls_must_progress();
// Advances every outstanding request as far as it goes without waiting.
void progress();
// Completes every request outstanding on `ctx` (a blocking call there, or its deletion).
void drain(Context* ctx);
// Before a call on `ctx` uses the context's memory or level communicators: a blocking call
// completes the requests outstanding there; a nonblocking one only those on lent memory.
void before_call(Context* ctx, bool nonblocking);
// Whether some of r[0..n) is a libhier request whose schedule has not finished.
bool unfinished(int n, const MPI_Request* r);
// Whether `r` is one of libhier's requests (not yet freed).
bool is_collective_request(MPI_Request r);
// Adds `after` behind the work of nonblocking request h once its schedule completed without error,
// before the program's completion call sees it complete (its code is the request's). The
// collectives' dispatch copies host copies of device buffers back with it (core/dispatch_coll.hpp).
// False: h is not one of libhier's requests still running (complete already: the caller runs
// `after` itself).
bool when_complete(MPI_Request h, std::function<int()> after);
// Seconds the program spent in completion calls while libhier's requests were outstanding.
void note_wait(double seconds);

}  // namespace hier::exec
