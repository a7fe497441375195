// Runs one rank's schedule to completion with PMPI calls on the level communicators.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "exec/device_stage.hpp"
#include "exec/device_steps.hpp"
#include "exec/direct.hpp"
#include "exec/scratch.hpp"
#include "diag/trace.hpp"
#include "exec/typed.hpp"
#include "sched/ir.hpp"
#include "topo/levels.hpp"

namespace hier::exec {

// How byte schedules reach the user's blocks (allgather(v), alltoall): the collective's entry
// point knows the user's datatypes, counts and displacements.
class Blocks {
 public:
  virtual ~Blocks() = default;
  virtual int load(int block, char* dst, int64_t bytes) = 0;         // user's send block -> bytes
  virtual int store(int block, const char* src, int64_t bytes) = 0;  // bytes -> user's receive block
};

struct Binding {
  const char* send = nullptr;  // unit 0 of each buffer (element schedules: the element's address)
  char* recv = nullptr;
  char* scratch = nullptr;
  MPI_Aint stride = 1;         // bytes per unit: the datatype's extent, or 1 for byte schedules
  MPI_Datatype type = MPI_BYTE;
  MPI_Op op = MPI_OP_NULL;
  const TypeInfo* info = nullptr;          // element schedules: for local typed copies
  Blocks* blocks = nullptr;
  ScratchSet* tmp = nullptr;  // for steps libhier runs itself (exec/direct.hpp); null: never
  // Quantized schedules (Schedule::quant_bits): the Records buffer (byte offsets), and the call
  // site's residual (Schedule::residual values of `type`; null: no error feedback this call),
  // device memory where the Quantize steps' values are (exec/quant_call.cpp).
  char* records = nullptr;
  char* residual = nullptr;
  // Where each buffer lives, indexed by sched::Buf (Send, Recv, Scratch, Records): a Device
  // buffer goes as it is to the (GPU-aware) MPI in level steps, and local steps on it run as
  // `dev`'s kernels (exec/device_steps.hpp); host code never reads it. `tmp` must then be device
  // scratch too (Context::dtmp), and `blocks` move device memory.
  Loc loc[4] = {Loc::Host, Loc::Host, Loc::Host, Loc::Host};
  const DeviceOps* dev = nullptr;  // set whenever some buffer is Device
  // Device buffers under an MPI that is not GPU-aware (Context::device_stage): the message steps
  // run on host copies in `stage` (pinned, slot k for step k of a wave; exec/device_stage.hpp),
  // libhier's own exchanges among them on host scratch `stage_tmp`. Null: device pointers go to
  // the MPI.
  ScratchSet* stage = nullptr;
  ScratchSet* stage_tmp = nullptr;
};

// Routes `s` as the plan does (model::route_inside_nodes: Via::Shm and each step's single copy
// or copy-in, for this rank, HIER_SHM_CMA and the process's model; `elem_size`: the call's),
// the same on every rank. A step on a communicator without a segment then runs as messages,
// counted in the report's shm section (fallback_no_segment). Returns how many steps it marked.
int route_shm(sched::Schedule& s, const topo::Levels& lv, int64_t elem_size);

// Reserves in `tmp` what run() will take from it for `s` (null: run() gets no tmp), so that a
// run never allocates once the ranks depend on each other. `info`: the element type (element
// schedules), null for byte schedules. False when memory could not be had. Step k of a wave takes
// slot k of `tmp` (a step alone: slot 0); every slot is the executor's (callers keep nothing there).
bool reserve(const sched::Schedule& s, const topo::Levels& lv, const TypeInfo* info, ScratchSet* tmp);

// One rank's schedule as a state machine over groups of steps: a group is the consecutive steps
// of one wave (pipelined schedules, sched/pipeline.hpp), or one step alone (wave -1). A group is
// started (its local steps run at once, its level steps are issued), then completed; the next
// group starts only after that. Blocking execution (run() below) and nonblocking requests
// (exec/request.hpp) drive the same machine, so that both take the same steps with the same
// choices. `nonblocking`: every level step is issued nonblocking, also a step alone (MPI never
// matches a nonblocking collective with a blocking one, and every rank of a nonblocking call
// runs this mode); otherwise a step alone is one blocking PMPI call, as fast as before.
// On an error nothing further is started; what was started is still completed.
class Machine {
 public:
  Machine(const sched::Schedule& s, const topo::Levels& lv, const Binding& b, bool nonblocking);
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  bool done() const { return !in_flight_ && (next_ >= s_.steps.size() || rc_ != MPI_SUCCESS); }
  bool in_flight() const { return in_flight_; }
  // Every group has been started (the request may let the next one on its communicator issue).
  bool issued_all() const { return next_ >= s_.steps.size() || rc_ != MPI_SUCCESS; }
  // Starts the next group; only when nothing is in flight and !done().
  void start_group();
  // Completes the group in flight: waits for it (block), or tests it once. True when it is
  // complete (or nothing was in flight).
  bool complete_group(bool block);
  int rc() const { return rc_; }
  size_t groups_started() const { return groups_; }
  // HIER_TRACE (diag/trace.hpp): record each step under the call `id` (diag::trace::note_run),
  // as slices of the calling thread (blocking) or async slices (a request's).
  void trace_as(uint64_t id, bool async) {
    trace_id_ = id;
    trace_async_ = async;
  }
  // Waits for the kernels the local steps queued (device bindings); the executor calls it before
  // a level step alone is issued, when a wave with level steps starts (not inside the wave: its
  // steps are independent), and run() before it returns.
  int flush();

 private:
  const sched::Schedule& s_;
  const topo::Levels& lv_;
  const Binding& b_;
  bool nonblocking_;
  size_t next_ = 0;         // first step not started
  bool in_flight_ = false;
  size_t started_ = 0;      // level steps of the group in flight, in pending_[0..started_)
  size_t first_ = 0;        // its first step
  std::vector<Pending> pending_;
  std::vector<int> counts_, displs_, rcounts_, rdispls_;  // int copies for the blocking PMPI v-calls
  int rc_ = MPI_SUCCESS;
  size_t groups_ = 0;
  bool queued_ = false;  // kernels queued on the device since the last flush
  // Staged message steps of the group in flight (Binding::stage): what each copies back once
  // complete (s null: nothing).
  struct StagedOut {
    const sched::Step* s = nullptr;
    char* dst = nullptr;
    const char* host_dst = nullptr;
    StageView v;
  };
  std::vector<StagedOut> staged_;
  // Their host copies, queued ahead of the wave's issue (stage_wave): the addresses the PMPI call
  // takes and the event it waits for (exec/device_stage.hpp).
  struct StagedIn {
    bool queued = false;
    char* host_src = nullptr;
    char* host_dst = nullptr;
    void* ready = nullptr;
    StageView v;
  };
  std::vector<StagedIn> staged_in_;
  // HIER_TRACE: the call's id (0: not traced), the transport issue() took last, and per step of
  // the group in flight its issue and completion times and the kernel time seen inside it.
  uint64_t trace_id_ = 0;
  bool trace_async_ = false;
  diag::trace::Transport via_ = diag::trace::Transport::Local;
  struct Traced {
    uint64_t t0 = 0, t1 = 0, kernel = 0;
    diag::trace::Transport via = diag::trace::Transport::Local;
  };
  std::vector<Traced> traced_;
  void trace_step(const sched::Step& st, const Traced& t);
  int stage_step(const sched::Step& st, size_t slot);
  void stage_wave(size_t first, size_t end);

  int issue(const sched::Step& st, Pending* pd, size_t slot);
  int issue_at(const sched::Step& st, Pending* pd, char* src, char* dst, const DeviceOps* dev, Scratch* tmp);
  int issue_staged(const sched::Step& st, Pending* pd, size_t slot);
  int stage_back(StagedOut& o);
  int local(const sched::Step& st);
  int device_local(const sched::Step& st);
  int device_quant(const sched::Step& st);
  char* at(const sched::Ref& r) const;
  bool on_device(const sched::Ref& r) const { return b_.loc[static_cast<int>(r.buf)] == Loc::Device; }
};

// Runs `s` to completion: the Machine above, blocking (start a group, complete it, ...).
// On an error, everything already started is still completed before the first error returns.
int run(const sched::Schedule& s, const topo::Levels& lv, const Binding& b);

// The level communicator a step names (MPI_COMM_NULL: none).
MPI_Comm level_comm(const sched::CommRef& c, const topo::Levels& lv);

}  // namespace hier::exec
