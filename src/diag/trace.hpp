// HIER_TRACE: a timeline per rank in Chrome trace-event JSON (docs/diagnostics.md), written at
// MPI_Finalize and merged by `hier-report --trace`.
//
// What is recorded: every collective that reaches libhier's dispatch (a slice "X" on the calling
// thread, with the call, bytes, the plan, the schedule that ran, the model's prediction and the
// call site), each schedule step of a blocking call as a slice nested inside it (level, group,
// peer, bytes, transport, kernel time), and each nonblocking or persistent start as an async
// slice ("b" ... "e", from the start to the completion) whose steps are async slices nested
// under the same id, on whichever thread advanced them (the progress thread has its own track).
//
// Hot path. Off: one test of a global flag per call (CallScope below, in the generated
// wrappers) and per schedule (the executor's Machine). On: two CLOCK_MONOTONIC reads (vDSO) per
// slice and a few plain stores into this thread's buffer; no lock (a thread's buffer is made,
// under a lock, at its first event). A buffer holds kCapacity events; later ones are counted as
// dropped (the file says how many).
#pragma once

#include <atomic>
#include <cstdint>

namespace hier::diag::trace {

extern bool g_on;  // HIER_TRACE set (agreed by every rank); cleared at finalize

constexpr size_t kCapacity = 1 << 15;  // events per thread

// How a step moved its data (what the executor took, not only what the schedule asked for).
enum class Transport : uint8_t {
  Local,          // no peer: a copy, quantize, dequantize, ... on this rank
  Messages,       // the MPI's collective or point-to-point calls
  Direct,         // libhier's own exchange over MPI messages (direct reduce-scatter, padded allgatherv)
  ShmCopyIn,      // the node's shared segment, copied in and out of its slots
  ShmSingleCopy,  // the node's shared segment, reading the peers' buffers (process_vm_readv)
  DeviceMessages, // device pointers handed to a GPU-aware MPI
  Staged,         // device buffers copied through pinned host memory, then messages
  DeviceLocal,    // a local step as the GPU module's kernel
};
const char* to_string(Transport t);

uint64_t now_ns();  // CLOCK_MONOTONIC

// A step of a schedule, as the executor saw it.
struct StepInfo {
  const char* kind = "";  // sched::to_string(Kind)
  const char* level = "";  // "node", "cross", "leaders", "step1", "" (local)
  int group = 0;           // members of the level communicator (0: local)
  int peer = -1;           // root, or peer of a send / receive; -1: none
  int64_t bytes = 0;
  int wave = -1, chunk = -1;  // pipelined schedules: the wave, the step's stage
  Transport via = Transport::Local;
  int64_t kernel_ns = -1;  // reduce / quantize / pack time inside the step; -1: none
};

// The thread's running total of kernel time (reductions, quantization, packing), ns: the
// executor takes the difference across the code where a step's kernels run.
extern thread_local uint64_t tl_kernel_ns;
// Times a kernel (a reduction inside a level step): one flag test when off.
class Kernel {
 public:
  Kernel() {
    if (__builtin_expect(g_on, 0)) t0_ = now_ns();
  }
  ~Kernel() {
    if (__builtin_expect(t0_ != 0, 0)) tl_kernel_ns += now_ns() - t0_;
  }
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

 private:
  uint64_t t0_ = 0;
};

// The collective the calling thread is in (generated wrappers of the coll and icoll families).
void call_begin(int fn, const void* ra) noexcept;
void call_end() noexcept;
class CallScope {
 public:
  CallScope(int fn, const void* ra) {
    if (__builtin_expect(!g_on, 1)) return;
    on_ = true;
    call_begin(fn, ra);
  }
  ~CallScope() {
    if (__builtin_expect(on_, 0)) call_end();
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  bool on_ = false;
};

// What the planner decided for the current call (exec/prepare.cpp): the plan's text and the
// model's predicted time of what it chose (ns; 0: not costed) and of the MPI's own call.
void note_plan(const char* coll, int64_t bytes, const char* plan, int chunks, int quant_bits, double predicted_ns,
               double flat_ns, const char* why) noexcept;
// The schedule the current call runs (its name). Returns the call's id (its slice's), which its
// steps carry.
uint64_t note_run(const char* schedule) noexcept;

// A blocking step of call `id`, from t0 to t1 on this thread.
void step(uint64_t id, const StepInfo& s, uint64_t t0, uint64_t t1) noexcept;
// Nonblocking and persistent requests: the async slice of call `id` (note_run's), and its steps
// as async slices nested under it.
// async_begin returns the call's function (-1: none, as in MPI_Start), which async_end takes.
int async_begin(uint64_t id) noexcept;
void async_end(uint64_t id, int fn) noexcept;
void async_step(uint64_t id, const StepInfo& s, uint64_t t0, uint64_t t1) noexcept;

// This thread's track name in the trace (e.g. "libhier progress").
void name_thread(const char* name) noexcept;

// Lifecycle (core/lifecycle.cpp). At MPI_Init: on when HIER_TRACE is set. At MPI_Finalize, on
// every rank while MPI still works: measures this rank's clock offset against rank 0 (a few
// ping-pongs on a duplicate of MPI_COMM_WORLD), then writes the file.
void trace_init(bool on);
void trace_finalize(int rank, int size);

}  // namespace hier::diag::trace
