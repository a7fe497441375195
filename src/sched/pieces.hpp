// What the PMPI call of a level step reads and writes on one rank of its communicator, piece by
// piece: the meaning of each Kind (sched/ir.hpp) as exec::Machine::issue_at hands it to the MPI,
// written once. Two users need it to the byte and must agree: exec/device_stage.cpp copies
// exactly these pieces between device and pinned host memory around a staged step (an MPI that
// is not GPU-aware), and model/cost_device.cpp prices those copies. Each kept its own rule
// before, and the model's had drifted (it priced a gatherv root as reading the whole gather,
// where the root reads its own piece only). A change to what issue_at passes the MPI changes
// this walk; the staged device tests (tests/device, FAKE_GPU_AWARE=0 with the simulated module)
// fail on a piece it misses.
#pragma once

#include <cstdint>
#include <vector>

#include "sched/ir.hpp"

namespace hier::sched {

// Where a piece lies: read from the step's src, read from its dst (in place: the MPI reads this
// rank's own piece there, or the root's data of a bcast), or written to dst.
enum class Side : uint8_t { ReadSrc, ReadDst, WriteDst };

// One rank's view of a level step: its rank and size in the step's communicator, and the bytes
// per unit of the step's counts.
struct PieceView {
  int me = 0, size = 1;
  int64_t unit = 1;
};
// The view of step s for rank `me` of `size`, `elem_bytes` bytes per element of an element
// schedule: a step on records (Step::bytes) counts bytes whatever the schedule's unit.
inline PieceView piece_view(const Step& s, int me, int size, int64_t elem_bytes) {
  return {me, size, s.bytes ? 1 : elem_bytes};
}

// Member i's entry of a step's per-member vector (counts, displs, ...): 0 past its end.
inline int64_t member_at(const std::vector<int64_t>& v, int i) {
  return i < static_cast<int>(v.size()) ? v[i] : 0;
}

// Calls f(side, offset, bytes) for every piece of a buffer that the PMPI call of step s reads or
// writes on rank v.me, offsets in bytes from the step's src or dst address, kind by kind as
// Machine::issue_at passes them. In place, the MPI reads this rank's own piece from dst, and a
// written span may include it (the stager then reads it first, so that copying the span back
// rewrites it unchanged). Pieces may be empty (bytes 0).
template <class F>
void for_each_piece(const Step& s, const PieceView& v, F&& f) {
  const int64_t u = v.unit, n = s.count;
  const int me = v.me, p = v.size;
  auto cnt = [&s](int i) { return member_at(s.counts, i); };
  auto dsp = [&s](int i) { return member_at(s.displs, i); };
  const Side in = s.in_place ? Side::ReadDst : Side::ReadSrc;
  switch (s.kind) {
    case Kind::Allreduce:
      f(in, 0, n * u);
      f(Side::WriteDst, 0, n * u);
      return;
    case Kind::ReduceScatter: {
      int64_t all = 0;
      for (int i = 0; i < p; ++i) all += cnt(i);
      f(Side::ReadSrc, 0, all * u);
      f(Side::WriteDst, 0, cnt(me) * u);
      return;
    }
    case Kind::Allgather:
      f(in, s.in_place ? me * n * u : 0, n * u);
      f(Side::WriteDst, 0, p * n * u);
      return;
    case Kind::Allgatherv:
      f(in, s.in_place ? dsp(me) * u : 0, cnt(me) * u);
      for (int i = 0; i < p; ++i) f(Side::WriteDst, dsp(i) * u, cnt(i) * u);
      return;
    case Kind::Bcast: f(me == s.root ? Side::ReadDst : Side::WriteDst, 0, n * u); return;
    case Kind::Scatterv:
      if (me == s.root)
        for (int i = 0; i < p; ++i) f(Side::ReadSrc, dsp(i) * u, cnt(i) * u);
      if (me != s.root || !s.in_place) f(Side::WriteDst, 0, cnt(me) * u);
      return;
    case Kind::Gatherv:
      if (me != s.root) {
        f(Side::ReadSrc, 0, cnt(me) * u);
        return;
      }
      f(in, s.in_place ? dsp(me) * u : 0, cnt(me) * u);
      for (int i = 0; i < p; ++i) f(Side::WriteDst, dsp(i) * u, cnt(i) * u);
      return;
    case Kind::Reduce:
      f(me == s.root ? in : Side::ReadSrc, 0, n * u);
      if (me == s.root) f(Side::WriteDst, 0, n * u);
      return;
    case Kind::Alltoall:
      f(Side::ReadSrc, 0, p * n * u);
      f(Side::WriteDst, 0, p * n * u);
      return;
    case Kind::Alltoallv:
      for (int i = 0; i < p; ++i) {
        f(Side::ReadSrc, dsp(i) * u, cnt(i) * u);
        f(Side::WriteDst, member_at(s.rdispls, i) * u, member_at(s.rcounts, i) * u);
      }
      return;
    case Kind::Send: f(Side::ReadSrc, 0, n * u); return;
    case Kind::Recv: f(Side::WriteDst, 0, n * u); return;
    default: return;  // Barrier, and the local kinds: no PMPI call's bytes
  }
}

// The bytes of those pieces: read (from src, or dst in place) and written, on rank v.me.
struct PieceBytes {
  int64_t read = 0, written = 0;
};
PieceBytes piece_bytes(const Step& s, const PieceView& v);

// Over the `size` ranks of step s: the most bytes any one reads and the most any one writes
// (`elem_bytes` as piece_view's). The model prices a staged step's copies with it: every rank's
// copies in come before the step's messages and its copies back after them, so the slowest rank
// on each side sets the pace of that side.
PieceBytes most_piece_bytes(const Step& s, int size, int64_t elem_bytes);

}  // namespace hier::sched
