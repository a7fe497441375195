#include "dtype/device_p2p.hpp"

#include "device/module.hpp"

#include <climits>
#include <memory>

#include "config/config.hpp"
#include "device/module.hpp"
#include "device/pointer.hpp"
#include "device/runtime_copy.hpp"
#include "device/stage.hpp"
#include "diag/log.hpp"
#include "dtype/cache.hpp"
#include "dtype/device_pack.hpp"
#include "dtype/engine.hpp"
#include "dtype/planner.hpp"
#include "dtype/requests.hpp"  // landed_bytes

namespace hier::dtype {
namespace {

// Whether `count` elements of c at `buf` are a case for the kernels. Positive extents only:
// the span a short message is landed through (device_land) is then simply [true_lb, end).
bool takes(const Canon* c, int64_t count) {
  if (!c || !c->ok || c->size <= 0 || c->extent <= 0 || c->true_extent <= 0) return false;
  if (c->dense && (count == 1 || c->contiguous)) return false;  // already contiguous bytes
  return packed_bytes(count, c->size, INT_MAX) >= 0;
}

// Lands the first `bytes` of the packed stream through a host copy of the buffer's span: a
// short message (the host engine unpacks a prefix), or kernels that failed after the bytes came.
void land_through_host(const Canon& c, const char* packed, int64_t bytes, int64_t count, void* buf) {
  const int64_t span = (count - 1) * c.extent + c.true_extent;
  char* first = static_cast<char*>(buf) + c.true_lb;
  std::unique_ptr<char[]> host(new (std::nothrow) char[static_cast<size_t>(span)]);
  if (!host || !device::runtime_copy(host.get(), first, static_cast<size_t>(span))) {
    HIER_WARN("dtype", "a message for device memory could not be landed (%lld bytes lost)", static_cast<long long>(bytes));
    return;
  }
  unpack_prefix(c, packed, bytes, count, host.get() - c.true_lb);
  if (!device::runtime_copy(first, host.get(), static_cast<size_t>(span)))
    HIER_WARN("dtype", "the GPU runtime refused to copy a received message into device memory");
}

}  // namespace

DeviceMessage device_message(const device::ModuleTable& m, const void* buf, int64_t count, MPI_Datatype t, bool send) {
  DeviceMessage msg;
  if (count <= 0 || count > INT_MAX || !buf || buf == MPI_BOTTOM) return msg;
  Canon* c = peek(t);  // held by the type's attribute for the length of this call
  if (!takes(c, count)) return msg;  // before the pointer query: contiguous types cost nothing more
  if (device::classify_typed(buf, count, t) == device::MemKind::Host) return msg;
  if (!plan_device_kernels(*c, count, send, device::mpi_gpu_aware(device::runtime(), config::get().gpu_aware)))
    return msg;  // the model prefers host copies of the span, or the GPU-aware MPI's own handling
  {
    device::DeviceScope on(device::device_of(buf));  // the program on the buffer's device
    if (!device_ready(m, *c)) return msg;
  }
  msg.bytes = static_cast<int>(count * c->size);
  msg.stage = stage_acquire(static_cast<size_t>(msg.bytes));
  if (!msg.stage.p) return msg;
  msg.module = &m;
  c->retain();  // a receive may complete after the program freed the type
  msg.canon = CanonRef(c);
  if (send) {
    const auto rc = device_kernels(m, *msg.canon.get(), true, const_cast<void*>(buf), count, msg.stage.p);
    if (!rc || *rc != MPI_SUCCESS) device_release(msg);  // nothing sent: the staged path has it
  }
  return msg;
}

void device_land(DeviceMessage& msg, int64_t count, void* buf, const MPI_Status& st, int err) {
  if (const MPI_Count bytes = landed_bytes(st, err); bytes > 0) {
    const bool whole = bytes >= msg.bytes;
    const auto rc = whole ? device_kernels(*msg.module, *msg.canon.get(), false, buf, count, msg.stage.p) : std::nullopt;
    if (!rc || *rc != MPI_SUCCESS) land_through_host(*msg.canon, msg.stage.p, bytes, count, buf);
  }
  device_release(msg);
}

void device_release(DeviceMessage& msg) {
  if (msg.stage.p) stage_release(msg.stage);
  msg = DeviceMessage{};
}

}  // namespace hier::dtype
