// Message steps of schedules bound to device buffers under an MPI that is not GPU-aware
// (Context::device_stage; docs/device-buffers.md, "Staged message steps"): the local steps stay
// the GPU module's kernels, and each level step runs on host copies of exactly the bytes it
// moves. Before the step, what the MPI reads is copied device -> host (on the module's stream,
// then waited for through an event of its own: exec/executor.cpp queues a wave's copies in
// first, and each step waits for its own); the PMPI call runs on the host copies; after it completes, what the MPI
// wrote is copied host -> device (queued; the executor synchronizes before the next message
// step and at the end). A quantized schedule's message steps move records, so only the records
// cross to the host.
//
// The host copies live in page-locked memory from the module (Loc::Pinned), laid out as one
// area per step of a wave (slot k for step k, as the executor's tmp), each mirroring the spans
// of the step's buffers that the MPI touches, so that the step's counts and displacements hold
// unchanged. stage_reserve takes it at the schedule's cache miss, before the ranks agree.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "exec/scratch.hpp"
#include "sched/pieces.hpp"

namespace hier::sched {
struct Schedule;
}  // namespace hier::sched
namespace hier::topo {
struct Levels;
}

namespace hier::exec {

class DeviceOps;

// This rank's view of a message step: its rank and size in the step's communicator, and the
// bytes per unit of the step's counts (1 for steps on records and byte schedules). The pieces
// staged are sched::for_each_piece's (sched/pieces.hpp), the walk the model prices too.
using StageView = sched::PieceView;
// The view of step s on level communicator c (`unit`: bytes per element of the schedule's
// element steps); false where c is null or does not answer.
bool stage_view(const sched::Step& s, MPI_Comm c, int64_t unit, StageView& v);

// The host area of one staged step: the spans (bytes from the step's src and dst addresses)
// of what the MPI reads from src, and reads (in place) or writes in dst.
struct StageLayout {
  int64_t src_lo = 0, src_hi = 0, dst_lo = 0, dst_hi = 0;
  int64_t dst_at() const { return (src_hi - src_lo + 63) / 64 * 64; }  // the dst area's offset
  int64_t bytes() const { return dst_at() + (dst_hi - dst_lo); }
};
StageLayout stage_layout(const sched::Step& s, const StageView& v);

// Queues the device -> host copies of what step s reads (src and dst: the step's device
// addresses, staged where *_dev) into `host` (stage_layout(s, v).bytes()), then an event behind
// them in *ready, and gives the addresses the PMPI call takes instead (the same displacements
// apply). stage_wait(*ready) before the MPI reads them: it waits for these copies and what was
// queued before them (kernels, earlier steps' copies back into the same area), not for the copies
// of the steps queued after (a wave's later steps), so those overlap this step's messages.
int stage_in(const sched::Step& s, const StageView& v, const DeviceOps& dev, const char* src, bool src_dev, char* dst,
             bool dst_dev, char* host, char** host_src, char** host_dst, void** ready);
// Waits for the event of stage_in and gives it back (null: the stream had no event to give,
// then the whole stream is waited for).
int stage_wait(const DeviceOps& dev, void* ready);
// Queues the host -> device copies of what step s wrote at host_dst back to dst (not waited for).
int stage_out(const sched::Step& s, const StageView& v, const DeviceOps& dev, const char* host_dst, char* dst);

// At the cache miss: the staging areas every message step of `s` needs on this rank, in `stage`
// (slot k for step k of a wave). `unit`: bytes per element of the schedule's element steps.
bool stage_reserve(const sched::Schedule& s, const topo::Levels& lv, int64_t unit, ScratchSet& stage);

}  // namespace hier::exec
