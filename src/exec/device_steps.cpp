#include "exec/device_steps.hpp"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "config/config.hpp"
#include "device/module.hpp"
#include "device/reduce_mpi.hpp"
#include "exec/coll_quant.hpp"
#include "exec/context.hpp"
#include "exec/device_stage.hpp"
#include "exec/executor.hpp"
#include "exec/scratch.hpp"
#include "util/inject.hpp"

namespace hier::exec {
namespace {

thread_local int t_device_call = 0;
thread_local const DeviceOps* t_call_ops = nullptr;  // the DeviceCall's operations
thread_local int t_call_dev = -1;                     // and its device

const device::ModuleTable* table() { return device::module(config::get().gpu_module.c_str()); }

// The module's error codes are its runtime's: any failure is an MPI error of libhier's own.
int mpi_rc(int module_rc) { return module_rc == 0 ? MPI_SUCCESS : MPI_ERR_OTHER; }

}  // namespace

int DeviceOps::copy(void* dst, const void* src, int64_t bytes) const {
  if (bytes <= 0) return MPI_SUCCESS;
  auto* m = static_cast<const device::ModuleTable*>(table_);
  return mpi_rc(m->copy(dst, src, static_cast<size_t>(bytes), stream_));
}

int DeviceOps::reduce(const void* in, void* inout, int64_t n, MPI_Datatype t, MPI_Op op) const {
  if (n <= 0) return MPI_SUCCESS;
  const auto et = device::elem_type_of(t);
  const auto ro = device::reduce_op_of(op);
  if (!et || !ro) return MPI_ERR_OP;
  auto* m = static_cast<const device::ModuleTable*>(table_);
  return mpi_rc(m->reduce(*ro, *et, in, inout, n, stream_));
}

namespace {
std::optional<device::QuantType> quant_type_of(MPI_Datatype t) {
  if (t == MPI_FLOAT) return device::QuantType::F32;
  if (t == MPI_DOUBLE) return device::QuantType::F64;
  if (quant_f16(t)) return device::QuantType::F16;
  return std::nullopt;
}
}  // namespace

int DeviceOps::quantize(int bits, MPI_Datatype t, const void* x, int64_t n, int64_t block, void* records) const {
  const auto qt = quant_type_of(t);
  if (!qt) return MPI_ERR_TYPE;
  auto* m = static_cast<const device::ModuleTable*>(table_);
  // Blocks sent as NaN (every rank dequantizes them alike, as on the host): counted on the
  // device, read at the next sync; the call neither waits nor locks here.
  if (bad_) counting_.store(true, std::memory_order_relaxed);
  return mpi_rc(m->quantize(bits, *qt, x, n, block, records, bad_, stream_));
}

int DeviceOps::dequantize(int bits, MPI_Datatype t, const void* records, int64_t n, int64_t block, void* out,
                          bool add) const {
  const auto qt = quant_type_of(t);
  if (!qt) return MPI_ERR_TYPE;
  auto* m = static_cast<const device::ModuleTable*>(table_);
  return mpi_rc(m->dequantize(bits, *qt, records, n, block, out, add ? 1 : 0, stream_));
}

int DeviceOps::feedback(int bits, MPI_Datatype t, const void* records, const void* x, int64_t n, int64_t block,
                        void* r) const {
  const auto qt = quant_type_of(t);
  if (!qt) return MPI_ERR_TYPE;
  auto* m = static_cast<const device::ModuleTable*>(table_);
  return mpi_rc(m->feedback(bits, *qt, records, x, n, block, r, stream_));
}

int DeviceOps::add(MPI_Datatype t, const void* r, void* x, int64_t n) const {
  const auto qt = quant_type_of(t);
  if (!qt) return MPI_ERR_TYPE;
  auto* m = static_cast<const device::ModuleTable*>(table_);
  return mpi_rc(m->quant_add(*qt, r, x, n, stream_));
}

int DeviceOps::dequantize_sum(int bits, MPI_Datatype t, const void* records, int64_t part_bytes, int parts, int64_t n,
                              int64_t block, void* out) const {
  const auto qt = quant_type_of(t);
  if (!qt) return MPI_ERR_TYPE;
  auto* m = static_cast<const device::ModuleTable*>(table_);
  return mpi_rc(m->dequantize_sum(bits, *qt, records, part_bytes, parts, n, block, out, stream_));
}

int DeviceOps::zero(void* p, int64_t bytes) const {
  if (bytes <= 0) return MPI_SUCCESS;
  auto* m = static_cast<const device::ModuleTable*>(table_);
  return mpi_rc(m->memset(p, 0, static_cast<size_t>(bytes), stream_));
}

int DeviceOps::event_create(void** e) const {
  return mpi_rc(static_cast<const device::ModuleTable*>(table_)->event_create(e));
}
void DeviceOps::event_destroy(void* e) const {
  if (e) static_cast<const device::ModuleTable*>(table_)->event_destroy(e);
}
int DeviceOps::record(void* e) const {
  return mpi_rc(static_cast<const device::ModuleTable*>(table_)->event_record(e, stream_));
}
int DeviceOps::wait(void* e) const { return mpi_rc(static_cast<const device::ModuleTable*>(table_)->event_wait(e)); }

bool device_quantizable(MPI_Datatype t) { return quant_type_of(t).has_value(); }

int DeviceOps::sync() const {
  auto* m = static_cast<const device::ModuleTable*>(table_);
  const bool count = counting_.exchange(false, std::memory_order_relaxed);
  int rc = count ? m->copy(bad_host_, bad_, sizeof *bad_, stream_) : 0;
  const int synced = m->sync(stream_);
  if (rc == 0) rc = synced;
  if (rc == 0 && count) bad_seen_.store(static_cast<int64_t>(*bad_host_), std::memory_order_relaxed);
  return mpi_rc(rc);
}

namespace {
// A module that loads but cannot run (a runtime without a usable device, a stand-in driver)
// counts as none: one round trip through device memory decides, once.
bool works(const device::ModuleTable* m, void* stream) {
  constexpr size_t kBytes = 64;
  void* d = nullptr;
  if (m->alloc(&d, kBytes) != 0 || !d) return false;
  unsigned char out[kBytes], back[kBytes] = {};
  for (size_t i = 0; i < kBytes; ++i) out[i] = static_cast<unsigned char>(i * 7 + 1);
  const bool queued = m->copy(d, out, kBytes, stream) == 0 && m->copy(back, d, kBytes, stream) == 0;
  // Synchronized whatever was queued: a first copy queued before a second one failed still reads
  // `out` (this frame) and writes `d` (released next).
  const bool ok = m->sync(stream) == 0 && queued && std::memcmp(out, back, kBytes) == 0;
  m->release(d);
  return ok;
}
}  // namespace

std::unique_ptr<DeviceOps> DeviceOps::make(int d) {
  const device::ModuleTable* m = table();
  if (!m || d < 0 || d >= device::kMaxDevices) return nullptr;
  device::DeviceScope on(d);
  std::unique_ptr<DeviceOps> ops(new DeviceOps);
  ops->table_ = m;
  ops->device_ = d;
  // No stream of its own: the device's default stream (which every other stream waits for).
  ops->own_stream_ = m->stream_create(&ops->stream_) == 0;
  if (!ops->own_stream_) ops->stream_ = nullptr;
  void* bad = nullptr;
  void* host = nullptr;
  if (m->alloc(&bad, sizeof *ops->bad_) != 0) return nullptr;
  ops->bad_ = static_cast<unsigned long long*>(bad);
  if (m->host_alloc(&host, sizeof *ops->bad_host_) != 0) return nullptr;
  ops->bad_host_ = static_cast<unsigned long long*>(host);
  *ops->bad_host_ = 0;
  if (m->memset(ops->bad_, 0, sizeof *ops->bad_, ops->stream_) != 0 || m->sync(ops->stream_) != 0) return nullptr;
  return ops;
}

DeviceOps::~DeviceOps() {
  auto* m = static_cast<const device::ModuleTable*>(table_);
  if (!m) return;
  device::DeviceScope on(device_);
  if (stream_) (void)m->sync(stream_);
  if (bad_) m->release(bad_);
  if (bad_host_) m->host_release(bad_host_);
  if (own_stream_) m->stream_destroy(stream_);
}

const DeviceOps* device_ops() {
  if (t_call_ops) return t_call_ops;
  // The process's, per device: null until a module is loaded (a runtime may come after the
  // first ask), then for good; whether the module works is decided once, on the first device.
  static std::mutex mu;
  static std::unique_ptr<DeviceOps> per_device[device::kMaxDevices];
  static std::atomic<int> usable{-1};  // -1 not tried, 0 no, 1 yes
  const device::ModuleTable* m = table();
  if (!m || usable.load(std::memory_order_acquire) == 0) return nullptr;
  const int d = device::current_device();
  if (d < 0 || d >= device::kMaxDevices) return nullptr;
  std::lock_guard<std::mutex> lk(mu);
  if (!per_device[d]) {
    per_device[d] = DeviceOps::make(d);
    if (usable.load(std::memory_order_relaxed) < 0)
      usable.store(per_device[d] && works(m, per_device[d]->stream_) ? 1 : 0, std::memory_order_release);
  }
  return usable.load(std::memory_order_relaxed) == 1 ? per_device[d].get() : nullptr;
}

int device_of_call() { return t_call_dev >= 0 ? t_call_dev : device::current_device(); }

bool device_reducible(MPI_Datatype t, MPI_Op op) {
  return device::elem_type_of(t).has_value() && device::reduce_op_of(op).has_value();
}

namespace {
// Memory from the module: device memory, or page-locked host memory (pinned).
void* module_alloc(size_t bytes, bool pinned) {
  const device::ModuleTable* m = table();
  void* p = nullptr;
  return m && (pinned ? m->host_alloc : m->alloc)(&p, bytes) == 0 ? p : nullptr;
}
void module_free(void* p, bool pinned) {
  if (const device::ModuleTable* m = table(); m && p) (pinned ? m->host_release : m->release)(p);
}
}  // namespace

void* device_alloc(size_t bytes) { return module_alloc(bytes, false); }
void device_free(void* p) { module_free(p, false); }
void* pinned_alloc(size_t bytes) { return module_alloc(bytes, true); }
void pinned_free(void* p) { module_free(p, true); }

void bind_device(Binding& b, Context& ctx) {
  for (Loc& l : b.loc) l = Loc::Device;
  b.dev = device_ops();
  b.tmp = &ctx.on_device().dtmp;
  if (ctx.device_stage) {  // an MPI that is not GPU-aware: message steps on host copies
    b.stage = &ctx.stage;
    b.stage_tmp = &ctx.tmp;
  }
}

int run_on_device(const sched::Schedule& s, Binding& b, Context& ctx) {
  // Reserved at the miss on the device of that call; a call on another device takes (and keeps)
  // its own there.
  b.scratch = ctx.on_device().dscratch.get(static_cast<size_t>(s.scratch));
  if (!b.scratch) return MPI_ERR_NO_MEM;
  bind_device(b, ctx);
  return run(s, *ctx.levels, b);
}

bool reserve_device(Context& ctx, const sched::Schedule& s, int64_t scratch_bytes, const TypeInfo* info) {
  if (!ctx.device_module) return true;
  if (util::injected_failure("device_scratch")) return false;  // tests: out of device memory
  Context::DeviceSide& side = ctx.on_device();  // the device of this call (the current one)
  if (scratch_bytes > 0 && !side.dscratch.get(static_cast<size_t>(scratch_bytes))) return false;
  if (!reserve(s, *ctx.levels, info, &side.dtmp)) return false;
  return !ctx.device_stage || reserve_stage(ctx.stage, ctx.tmp, ctx, s, info);
}

bool reserve_stage(ScratchSet& stage, ScratchSet& tmp, Context& ctx, const sched::Schedule& s, const TypeInfo* info) {
  if (util::injected_failure("device_stage")) return false;  // tests: no pinned host memory
  // (device bindings are of dense types: an element's bytes are its size, as Binding::stride)
  return stage_reserve(s, *ctx.levels, info ? info->size : 1, stage) && reserve(s, *ctx.levels, info, &tmp);
}

DeviceCall::DeviceCall(MPI_Comm comm, int device) : prev_ops_(t_call_ops), prev_device_(t_call_dev) {
  ++t_device_call;
  const device::ModuleTable* m = table();
  int cur = -1;
  if (device >= 0 && m && m->get_device(&cur) == 0 && cur != device && m->set_device(device) == 0) restore_ = cur;
  t_call_dev = device;
  Context* ctx = context_of(comm);  // built by the dispatch already (exec::gpu_path)
  const DeviceOps* ops = ctx ? ctx->on_device(device, true).ops.get() : nullptr;
  t_call_ops = nullptr;
  t_call_ops = ops ? ops : device_ops();  // no stream of its own: the process's on the device
}
DeviceCall::~DeviceCall() {
  --t_device_call;
  t_call_ops = prev_ops_;
  t_call_dev = prev_device_;
  if (restore_ >= 0) table()->set_device(restore_);
}
bool device_call() { return t_device_call > 0; }

}  // namespace hier::exec
