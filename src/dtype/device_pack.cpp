#include "dtype/device_pack.hpp"

#include <atomic>
#include <mutex>

#include "config/config.hpp"
#include "device/pointer.hpp"
#include "device/runtime_copy.hpp"
#include "device/stage.hpp"
#include "dtype/cache.hpp"
#include "dtype/engine.hpp"
#include "dtype/planner.hpp"

namespace hier::dtype {
namespace {

// The canonical form of t, when its typed buffer is device memory and the call is valid.
CanonRef checked(const void* typed, const void* packed, int64_t count, int64_t bytes, int64_t position, MPI_Comm comm,
                 MPI_Datatype t) {
  if (comm == MPI_COMM_NULL || count < 0 || position < 0 || bytes < 0 || !typed || !packed) return {};
  if (device::classify_typed(typed, count, t) == device::MemKind::Host) return {};
  CanonRef c = lookup(t);
  if (!c || !c->ok) return {};
  return c;
}

// The program of c on the current device (uploaded at the first call there, on the device's
// module stream, without waiting: the kernels wait for it on the device; two racing threads both
// upload and the loser discards its copy). Null: the module could not.
const void* device_program(Canon& c, const device::ModuleTable& m) {
  const int d = device::current_device();
  if (d < 0 || d >= device::kMaxDevices) return nullptr;
  std::atomic<void*>& slot = c.device_prog[d];
  if (void* p = slot.load(std::memory_order_acquire)) return p;
  void* p = nullptr;
  if (m.upload(&c.view, &p, device::module_stream()) != 0) return nullptr;
  c.device_mod.store(&m, std::memory_order_release);  // the one module: the same every time
  void* expected = nullptr;
  if (!slot.compare_exchange_strong(expected, p, std::memory_order_acq_rel)) {
    m.discard(p);
    return expected;
  }
  return p;
}

// One device scratch buffer per device for packed bytes bound for (or coming from) host memory,
// grown as needed and kept: the calls on one device that use it take turns.
std::mutex g_scratch_mu;
void* g_scratch[device::kMaxDevices] = {};
size_t g_scratch_bytes[device::kMaxDevices] = {};

void* scratch(const device::ModuleTable& m, size_t n) {
  const int d = device::current_device();
  if (d < 0 || d >= device::kMaxDevices) return nullptr;
  if (n <= g_scratch_bytes[d]) return g_scratch[d];
  if (g_scratch[d]) m.release(g_scratch[d]);
  g_scratch[d] = nullptr;
  g_scratch_bytes[d] = 0;
  if (m.alloc(&g_scratch[d], n) != 0) return g_scratch[d] = nullptr;
  g_scratch_bytes[d] = n;
  return g_scratch[d];
}

// Runs `kernel(device packed pointer)` with the packed side at `packed` (host or device): a
// host side goes through the scratch, copied in before (unpack) or out after (pack).
template <class Kernel>
std::optional<int> with_packed(const device::ModuleTable& m, char* packed, int64_t need, bool to_packed, Kernel kernel) {
  void* s = device::module_stream();
  std::unique_lock<std::mutex> lk(g_scratch_mu, std::defer_lock);
  char* dev = packed;
  if (device::classify(packed) == device::MemKind::Host) {
    lk.lock();
    dev = static_cast<char*>(scratch(m, static_cast<size_t>(need)));
    if (!dev) return std::nullopt;  // no device memory: the staged path
    if (!to_packed && m.copy(dev, packed, static_cast<size_t>(need), s) != 0) return std::nullopt;
  }
  if (kernel(dev, s) != 0) return std::nullopt;  // nothing written to the user's buffers yet
  // From here the output is being written: a failure is the call's error.
  if (to_packed && dev != packed && m.copy(packed, dev, static_cast<size_t>(need), s) != 0) return MPI_ERR_OTHER;
  return m.sync(s) == 0 ? MPI_SUCCESS : MPI_ERR_OTHER;
}

}  // namespace

bool device_ready(const device::ModuleTable& m, Canon& c) { return device_program(c, m) != nullptr; }

std::optional<int> device_kernels(const device::ModuleTable& m, Canon& c, bool to_packed, void* typed, int64_t count,
                                  char* packed) {
  const int64_t need = packed_bytes(count, c.size);
  if (need < 0) return std::nullopt;
  if (need == 0) return MPI_SUCCESS;
  device::DeviceScope on(device::device_of(typed));  // the buffer's device, the caller's after
  const void* prog = device_program(c, m);
  if (!prog) return std::nullopt;
  return with_packed(m, packed, need, to_packed, [&](char* dev, void* s) {
    return to_packed ? m.pack(prog, typed, count, dev, s) : m.unpack(prog, dev, count, typed, s);
  });
}

namespace {

// One call of either direction: `count` elements of t at `typed` (device memory), the packed
// stream at packed + position, `bytes` long.
std::optional<int> run_call(const device::ModuleTable& m, bool to_packed, void* typed, int64_t count, MPI_Datatype t,
                            char* packed, int64_t bytes, int64_t& position, MPI_Comm comm, int64_t limit) {
  CanonRef c = checked(typed, packed, count, bytes, position, comm, t);
  if (!c) return std::nullopt;
  if (!plan_device_kernels(*c, count, to_packed, device::mpi_gpu_aware(device::runtime(), config::get().gpu_aware)))
    return std::nullopt;  // the model prefers host copies (staged), or the GPU-aware MPI's own handling
  const int64_t need = packed_bytes(count, c->size);
  if (need < 0 || bytes - position < need || need > limit - position) return std::nullopt;
  auto rc = device_kernels(m, const_cast<Canon&>(*c), to_packed, typed, count, packed + position);
  if (rc && *rc == MPI_SUCCESS) position += need;
  return rc;
}

}  // namespace

std::optional<int> device_pack_call(const device::ModuleTable& m, const void* inbuf, int64_t incount, MPI_Datatype t,
                                    void* outbuf, int64_t outsize, int64_t& position, MPI_Comm comm, int64_t limit) {
  return run_call(m, true, const_cast<void*>(inbuf), incount, t, static_cast<char*>(outbuf), outsize, position, comm,
                  limit);
}

std::optional<int> device_unpack_call(const device::ModuleTable& m, const void* inbuf, int64_t insize,
                                      int64_t& position, void* outbuf, int64_t outcount, MPI_Datatype t, MPI_Comm comm,
                                      int64_t limit) {
  return run_call(m, false, outbuf, outcount, t, const_cast<char*>(static_cast<const char*>(inbuf)), insize, position,
                  comm, limit);
}

}  // namespace hier::dtype
