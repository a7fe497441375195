// libhier's state for one user communicator: its level communicators, schedule cache and
// scratch memory. Stored as an MPI attribute (never in a map keyed by handle: handles are
// reused after free); the attribute's delete callback frees everything when the user frees the
// communicator, and a finalize hook frees what is left at MPI_Finalize.
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "exec/device_steps.hpp"
#include "exec/scratch.hpp"
#include "model/plan.hpp"
#include "sched/cache.hpp"
#include "topo/levels.hpp"

namespace hier::exec {

struct Context {
  MPI_Comm comm = MPI_COMM_NULL;          // the user's communicator that owns the attribute
  // libhier's duplicate of `comm` (its "shadow"), made when the context is (exec::enter): all of
  // libhier's traffic for `comm` runs on it or on the level communicators made from it. Null for
  // intercommunicators and one-rank communicators (flat_only).
  MPI_Comm internal = MPI_COMM_NULL;
  bool flat_only = false;
  bool built = false;                     // the levels were built (context_of), or found not to be
  std::unique_ptr<topo::Levels> levels;   // null: nothing hierarchical here (flat only)
  sched::Cache cache;
  Scratch scratch;
  ScratchSet tmp;  // for the executor's own level collectives (exec/direct.hpp), one per concurrent step
  // Some rank had a GPU runtime loaded when the levels were built, and every such rank found the
  // MPI GPU-aware (agreed with the levels): buffers may be device memory and the MPI takes them,
  // so collectives here are left to the MPI on every rank. Otherwise host schedules run, and a
  // rank copies its own device buffers to host memory through its runtime (core/coll_device.hpp).
  // A rank never decides this from its own buffers: the peers cannot see them.
  bool device_to_mpi = false;
  // Every rank that has a GPU runtime found the MPI GPU-aware and loaded the GPU module (agreed
  // with the levels, and some rank has one): the collectives libhier runs on device buffers
  // (exec/device_steps.hpp) run hierarchical schedules, a rank whose buffers are device memory
  // binding them as such; the others go to the MPI on every rank. device_module: this rank had
  // the module then, so its misses reserve device scratch too (on_device: dscratch, dtmp) and it
  // may bind device buffers (a rank that loads a runtime later stages instead).
  bool device_hier = false;
  bool device_module = false;
  // What this communicator keeps per device ordinal: its own stream and bad-block counter (ops,
  // made at the first DeviceCall there; null: the process's are used), the device scratch of
  // its schedules and of libhier's own exchanges. A miss reserves them on the call's device.
  struct DeviceSide {
    std::unique_ptr<DeviceOps> ops;
    bool ops_tried = false;
    Scratch dscratch{Loc::Device};
    ScratchSet dtmp{Loc::Device};
  };
  // `with_ops`: its operations made if not yet (a DeviceCall's; a host call's miss makes none).
  DeviceSide& on_device(int d, bool with_ops = false);
  DeviceSide& on_device() { return on_device(device_of_call()); }
  // device_hier on an MPI that is not GPU-aware: every rank with a runtime has the module, none
  // found the MPI GPU-aware (agreed with the levels). The schedules still bind device buffers,
  // and their message steps run on host copies in `stage` (pinned; exec/device_stage.hpp),
  // reserved at the misses of a rank with the module.
  bool device_stage = false;
  ScratchSet stage{Loc::Pinned};
  // The planner's decisions for this communicator's shape (model/plan.hpp), by (collective,
  // bytes, element size): a pure function of them, so every rank holds the same entries.
  std::map<std::tuple<int, int64_t, int64_t, bool, bool>, model::Plan> plans;  // (coll, bytes, elem_size, quantizable, nonblocking)
  // Nonblocking requests (exec/request.cpp, under its lock): memory of finished requests, kept
  // for the next; requests outstanding here; whether one runs on `scratch`/`tmp` above (then
  // every other call here first waits for it).
  std::vector<std::unique_ptr<RequestMemory>> request_memory;
  int requests = 0;
  bool memory_lent = false;
  // Persistent requests made here and not yet freed (exec/persistent.cpp): they keep the context
  // (its shadow and level communicators) past MPI_Comm_free; `orphaned`: the communicator was
  // freed meanwhile, and the last one's MPI_Request_free (or its completion after it) deletes it.
  int persistent = 0;
  bool orphaned = false;
  // The same on every rank of `comm` and unique among each rank's contexts (agreed over the
  // shadow when it is made; 0: no shadow): names this context to the other ranks when idle
  // contexts are released for context IDs (release_idle).
  uint64_t key = 0;

  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();  // frees the levels, then the shadow

 private:
  std::mutex devices_mu_;
  std::map<int, DeviceSide> devices_;  // (a map: an entry never moves)
};

// Called by every collective on `comm` before anything else (core/dispatch_coll.hpp): the first
// one on a communicator creates its context, with the shadow duplicate (one PMPI_Comm_dup,
// collective over `comm`; every rank makes the same first collective call, whichever it is).
// After that, one load. Intercommunicators and one-rank communicators get a context without
// any communication; with every collective forced flat (HIER_ALGO) nothing is created.
void enter(MPI_Comm comm);

// The context of `comm` with its levels, built on first use over the shadow (collective over
// it): callers reach this only from a collective call that every rank makes with the same
// eligibility. A rank that reaches it when others do not (a program whose ranks call different
// collectives) waits on the shadow, where the hang watchdog names the mismatch, and never
// mixes libhier's messages with the user's.
Context* context_of(MPI_Comm comm);

// How `comm`'s collectives treat device buffers, agreed on every rank (builds the context: call
// it only where every rank does): Host (no GPU, or staged through host copies), ToMpi
// (Context::device_to_mpi, or no levels), DeviceHier (Context::device_hier), DeviceStaged
// (device_hier with device_stage). `bind_device`: this rank may bind device buffers
// (Context::device_module).
enum class GpuPath : uint8_t { Host, ToMpi, DeviceHier, DeviceStaged };
GpuPath gpu_path(MPI_Comm comm, bool* bind_device);

// The MPI ran out of communicators (context IDs: MPICH has 2,048 per process) in a call collective
// over `parent` (the program's MPI_Comm_dup / split / split_type / create, or libhier's shadow of
// a new communicator): frees libhier's shadow and level communicators of every context whose
// communicator's group lies inside `parent`'s (all of its ranks are then in this call), once its
// nonblocking requests completed, unless a rank still has persistent requests on it (agreed over
// `parent`). The next collective on such a communicator makes its context again. Collective over
// `parent`, an intracommunicator; returns how many contexts were released (the same on every rank).
int release_idle(MPI_Comm parent);

// Live contexts and the level communicators they hold (the lifecycle test checks these).
struct Census {
  long contexts = 0;
  long level_comms = 0;
};
Census census();

}  // namespace hier::exec
