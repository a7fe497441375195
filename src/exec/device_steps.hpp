// Schedules bound to device buffers (docs/device-buffers.md, "Hierarchical schedules on device
// buffers"): on a communicator whose ranks agreed that the MPI takes device pointers and that
// every rank with a GPU runtime loaded the GPU module (Context::device_hier), a rank whose
// buffers of a call are all device memory runs the same schedule as its peers with them bound
// as Loc::Device: level steps hand the device pointers to the MPI, and the local work (copies,
// the direct reduce-scatter's reductions, the user's blocks) runs as the module's kernels on its
// stream, synchronized before any message step reads what they wrote. Host code never touches
// such memory. Which binding a rank takes is its own choice: the steps are the same either way.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "exec/scratch.hpp"

namespace hier::sched {
struct Schedule;
}

namespace hier::exec {

// The GPU module's local operations on one device, on a stream of that device (all asynchronous
// but sync). The process has one per device (device_ops), each communicator its own per device
// (Context::on_device), so that two communicators' calls never wait for each other's work.
class DeviceOps {
 public:
  // Ops on device d (made current for the creation) with a stream of their own (the default
  // stream where none could be made); null: no module, or no bad-block counter could be made.
  static std::unique_ptr<DeviceOps> make(int d);
  ~DeviceOps();
  DeviceOps(const DeviceOps&) = delete;
  DeviceOps& operator=(const DeviceOps&) = delete;
  int device() const { return device_; }
  // Blocks that quantize could not quantize (sent as NaN) since these ops were made, as read by
  // the last sync (the count is kept on the device and copied back only there).
  int64_t bad_blocks() const { return bad_seen_.load(std::memory_order_relaxed); }

  int copy(void* dst, const void* src, int64_t bytes) const;  // either side device or host memory
  // inout[i] = in[i] op inout[i] on device memory; MPI_ERR_OP for a pair without a kernel.
  int reduce(const void* in, void* inout, int64_t n, MPI_Datatype t, MPI_Op op) const;
  int sync() const;  // waits until everything queued is done (and reads the bad-block count)
  // The quantization steps of quantized schedules (quant/kernels.hpp) on device memory, values
  // of `t` (device_quantizable): records of `bits` in blocks of `block` values. quantize counts
  // the blocks it could not quantize on the device (bad_blocks, read by the next sync);
  // dequantize adds onto out where `add`; feedback writes the error feedback's residual
  // r = x - deq(records), 0 where not finite.
  int quantize(int bits, MPI_Datatype t, const void* x, int64_t n, int64_t block, void* records) const;
  int dequantize(int bits, MPI_Datatype t, const void* records, int64_t n, int64_t block, void* out, bool add) const;
  int feedback(int bits, MPI_Datatype t, const void* records, const void* x, int64_t n, int64_t block, void* r) const;
  // The error feedback's x += r (quant::add_values), on values of t.
  int add(MPI_Datatype t, const void* r, void* x, int64_t n) const;
  // The fused dequantize-reduce of 16-bit values (quant::dequantize_sum_block): out = the sum of
  // the `parts` records at records + k * part_bytes, in float, rounded once.
  int dequantize_sum(int bits, MPI_Datatype t, const void* records, int64_t part_bytes, int parts, int64_t n,
                     int64_t block, void* out) const;
  int zero(void* p, int64_t bytes) const;  // device memory set to 0 (queued)
  // A point on the stream (record: what was queued so far) that the host can wait for alone,
  // without the work queued after it. `e` from event_create, released by event_destroy.
  int event_create(void** e) const;
  void event_destroy(void* e) const;
  int record(void* e) const;
  int wait(void* e) const;

 private:
  friend const DeviceOps* device_ops();
  DeviceOps() = default;
  const void* table_ = nullptr;  // device::ModuleTable
  void* stream_ = nullptr;
  bool own_stream_ = false;
  int device_ = 0;
  unsigned long long* bad_ = nullptr;       // device memory: the quantize kernels' count
  unsigned long long* bad_host_ = nullptr;  // pinned: where sync copies it
  mutable std::atomic<bool> counting_{false};  // a quantize was queued since the last sync
  mutable std::atomic<int64_t> bad_seen_{0};
};

// The GPU module's operations for this thread's call: inside a DeviceCall, the communicator's
// own on the call's device; elsewhere the process's on the current device. Loaded on first use
// (HIER_GPU_MODULE); null: none, or the module does not work here.
const DeviceOps* device_ops();
// The device the current call's buffers live on: DeviceCall's, else the current device.
int device_of_call();

// Whether a reduction of (t, op) has a kernel in the module (device/reduce_mpi.hpp).
bool device_reducible(MPI_Datatype t, MPI_Op op);
// Whether the module quantizes values of t (MPI_FLOAT, MPI_DOUBLE, and MPIX_C_FLOAT16 where
// libhier quantizes it: exec::quant_f16).
bool device_quantizable(MPI_Datatype t);

// Set by the collectives' dispatch (core/dispatch_coll.hpp) around a call on a
// Context::device_hier communicator whose used buffers on this rank are all device memory of
// dense types on device `device`: the entry points then bind them as Loc::Device, with comm's
// operations on that device (device_ops). The device is current for the scope, and the
// caller's again after it (a request completed later makes it current again: exec/request.cpp).
class DeviceCall {
 public:
  DeviceCall(MPI_Comm comm, int device);
  ~DeviceCall();
  DeviceCall(const DeviceCall&) = delete;
  DeviceCall& operator=(const DeviceCall&) = delete;

 private:
  int restore_ = -1;
  const DeviceOps* prev_ops_ = nullptr;
  int prev_device_ = -1;
};
bool device_call();

// Binds every buffer of `b` as device memory, with the module's operations and ctx's device
// scratch for libhier's own exchanges (Context::dtmp).
struct Binding;
struct Context;
struct TypeInfo;
void bind_device(Binding& b, Context& ctx);
// A blocking call's byte schedule s on device buffers: b bound as above, its scratch the device
// scratch reserve_device took at the schedule's miss (s.scratch bytes), then run.
int run_on_device(const sched::Schedule& s, Binding& b, Context& ctx);

// At a schedule's cache miss, on a rank that may bind device buffers (Context::device_module):
// device scratch of `scratch_bytes` and the device buffers of the schedule's own exchanges, so
// that a later call with this key bound either way allocates nothing. True elsewhere.
bool reserve_device(Context& ctx, const sched::Schedule& s, int64_t scratch_bytes, const TypeInfo* info);
// On a Context::device_stage communicator (part of reserve_device; a nonblocking request's own
// memory too): the pinned staging areas of the schedule's message steps in `stage`, and the host
// scratch of libhier's own exchanges that then run on host copies in `tmp`.
bool reserve_stage(ScratchSet& stage, ScratchSet& tmp, Context& ctx, const sched::Schedule& s, const TypeInfo* info);

}  // namespace hier::exec
