// Chunk pipelining. A large call is cut into chunks, each chunk's schedule is built by the
// collective's own builder as if the chunk were the whole call, and the chunks' steps are
// interleaved into waves: wave w runs stage w - c of every chunk c at once (started nonblocking,
// completed together), so chunk c crosses the slow level while chunk c + 1 is still being
// reduced inside the node and chunk c - 1 is gathered back. Each element is still reduced in
// exactly one place in one fixed order, so every rank gets the same bits; which rank reduces it
// depends on the chunking, so a float result may differ in its last bits between chunk sizes.
//
// Rules that make this safe (the unit tests' simulator checks them for every shape):
//  - a chunk's steps touch only that chunk's range of Send/Recv and its own scratch region;
//  - on every level communicator, every member issues its steps in one order (wave, then
//    chunk): ranks that skip a stage (bcast outside the root's node, tree non-leaders) keep the
//    stage numbers of the ranks that do not, through Step::stage;
//  - every level step of a pipelined schedule is nonblocking, also when it is alone in its wave:
//    MPI never matches a nonblocking collective with a blocking one.
// Quantized schedules (sched/build_quant.cpp) are pipelined by the same function: the call is cut
// at quantization block boundaries (`align`: every chunk a multiple of HIER_QUANT_BLOCK values
// but the last), so every block of the call is quantized as the unchunked schedule quantizes it;
// each chunk gets its own region of Records (bytes, 64-aligned) and of the call site's residual
// (Step::residual, error feedback), as it gets its own scratch.
#pragma once

#include <cstdint>
#include <functional>

#include "sched/build.hpp"
#include "sched/ir.hpp"

namespace hier::sched {

// At most this many chunks per call: bounds the requests in flight and the schedule's length.
constexpr int kMaxChunks = 64;

// How many chunks a call of `units` units (`bytes` in all) is cut into for chunks of about
// `chunk_bytes` (0: no pipelining): 1 to kMaxChunks, never more than the call's `align`-unit
// pieces (ceil(units / align): chunks are cut at multiples of `align`).
int chunk_count(int64_t units, int64_t bytes, int64_t chunk_bytes, int64_t align = 1);

// The chunks of an `units`-unit call: ceil(units / align) pieces of `align` units (the last may
// be shorter) dealt out as evenly as split_even deals units (the first chunks one piece more),
// so every chunk but the last is a multiple of `align`. align 1: split_even(units, chunks).
Split split_aligned(int64_t units, int chunks, int64_t align);

// The pipelined schedule of `chunks` nearly equal chunks (split_aligned) of an `units`-unit call;
// build(n) is the builder's schedule for a call of n units, its Send / Recv refs shifted by the
// chunk's displacement, Scratch and Records refs and Step::residual by the sizes of the chunks
// before it. chunks <= 1 (or more than the pieces): build(units) unchanged.
Schedule pipeline(int64_t units, int chunks, const std::function<Schedule(int64_t)>& build, int64_t align = 1);

}  // namespace hier::sched
