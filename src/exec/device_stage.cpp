#include "exec/device_stage.hpp"

#include <mpi.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "device/staged_bytes.hpp"
#include "exec/device_steps.hpp"
#include "exec/executor.hpp"
#include "sched/ir.hpp"
#include "sched/pieces.hpp"

namespace hier::exec {
namespace {

using sched::Side;

// Widens [lo, hi) to hold [off, off + bytes) (empty spans start at the first piece).
void widen(int64_t& lo, int64_t& hi, int64_t off, int64_t bytes) {
  if (bytes <= 0) return;
  if (lo == hi) {
    lo = off;
    hi = off + bytes;
    return;
  }
  lo = std::min(lo, off);
  hi = std::max(hi, off + bytes);
}

}  // namespace

bool stage_view(const sched::Step& s, MPI_Comm c, int64_t unit, StageView& v) {
  int me = 0, size = 1;
  if (c == MPI_COMM_NULL || PMPI_Comm_rank(c, &me) != MPI_SUCCESS || PMPI_Comm_size(c, &size) != MPI_SUCCESS)
    return false;
  v = sched::piece_view(s, me, size, unit);
  return true;
}

StageLayout stage_layout(const sched::Step& s, const StageView& v) {
  StageLayout l;
  sched::for_each_piece(s, v, [&l](Side side, int64_t off, int64_t bytes) {
    if (side == Side::ReadSrc) widen(l.src_lo, l.src_hi, off, bytes);
    else widen(l.dst_lo, l.dst_hi, off, bytes);
  });
  return l;
}

namespace {
// Events of staged steps, made at their first use and reused for good: a wave takes one per step.
std::mutex g_events_mu;
std::vector<void*> g_events;

void* take_event(const DeviceOps& dev) {
  {
    std::lock_guard<std::mutex> lk(g_events_mu);
    if (!g_events.empty()) {
      void* e = g_events.back();
      g_events.pop_back();
      return e;
    }
  }
  void* e = nullptr;
  return dev.event_create(&e) == MPI_SUCCESS ? e : nullptr;
}
void give_event(void* e) {
  std::lock_guard<std::mutex> lk(g_events_mu);
  g_events.push_back(e);
}
}  // namespace

int stage_in(const sched::Step& s, const StageView& v, const DeviceOps& dev, const char* src, bool src_dev, char* dst,
             bool dst_dev, char* host, char** host_src, char** host_dst, void** ready) {
  const StageLayout l = stage_layout(s, v);
  // (Addresses as the MPI takes them: the area's first byte is the span's.)
  *host_src = src_dev ? host - l.src_lo : const_cast<char*>(src);
  *host_dst = dst_dev ? host + l.dst_at() - l.dst_lo : dst;
  int rc = MPI_SUCCESS;
  int64_t copied = 0;
  sched::for_each_piece(s, v, [&](Side side, int64_t off, int64_t bytes) {
    if (rc != MPI_SUCCESS || bytes <= 0) return;
    if (side == Side::ReadSrc && src_dev) rc = dev.copy(*host_src + off, src + off, bytes);
    if (side == Side::ReadDst && dst_dev) rc = dev.copy(*host_dst + off, dst + off, bytes);
    if ((side == Side::ReadSrc && src_dev) || (side == Side::ReadDst && dst_dev)) copied += bytes;
  });
  device::note_staged_bytes(true, s.bytes, copied);
  // Always an event, copies or not: the MPI writes the area next, which the previous wave's
  // copies back may still read.
  *ready = rc == MPI_SUCCESS ? take_event(dev) : nullptr;
  if (*ready && dev.record(*ready) != MPI_SUCCESS) {
    give_event(*ready);
    *ready = nullptr;
  }
  return rc;
}

int stage_wait(const DeviceOps& dev, void* ready) {
  if (!ready) return dev.sync();  // (no event could be had: the whole stream)
  const int rc = dev.wait(ready);
  give_event(ready);
  return rc;
}

int stage_out(const sched::Step& s, const StageView& v, const DeviceOps& dev, const char* host_dst, char* dst) {
  int rc = MPI_SUCCESS;
  int64_t copied = 0;
  sched::for_each_piece(s, v, [&](Side side, int64_t off, int64_t bytes) {
    if (rc != MPI_SUCCESS || side != Side::WriteDst || bytes <= 0) return;
    rc = dev.copy(dst + off, host_dst + off, bytes);
    copied += bytes;
  });
  device::note_staged_bytes(false, s.bytes, copied);
  return rc;
}

bool stage_reserve(const sched::Schedule& s, const topo::Levels& lv, int64_t unit, ScratchSet& stage) {
  const size_t n = s.steps.size();
  for (size_t i = 0; i < n;) {
    const size_t j = sched::group_end(s, i);  // step k of the group takes slot k - i (as Machine::issue)
    for (size_t k = i; k < j; ++k) {
      const sched::Step& st = s.steps[k];
      if (st.comm.on == sched::On::None) continue;  // local steps: kernels, nothing staged
      const MPI_Comm c = level_comm(st.comm, lv);
      StageView v;
      if (!stage_view(st, c, unit, v) || !stage[k - i].get(static_cast<size_t>(stage_layout(st, v).bytes())))
        return false;
    }
    i = j;
  }
  return true;
}

}  // namespace hier::exec
