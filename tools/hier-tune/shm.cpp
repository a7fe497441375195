// hier-tune's shared-memory segment figures (the tune file's "shm" section, model::ShmRates):
// on a real segment of each node's communicator (shm/segment.hpp, as HIER_SHM builds them), every
// member at once, as a schedule's node step runs:
//  - copy_ns_per_byte: a member copies its buffer into its slot and every peer's slot out;
//  - reduce_ns_per_byte: a member folds every peer's slot into its buffer (MPI_Reduce_local,
//    float sum, what exec/shm_steps.cpp runs);
//  - single_ns_per_byte: where the members may read each other's memory (Segment::cma()), a
//    member reads a buffer of every peer's through the kernel (shm/cma.hpp), as the single-copy
//    steps do;
//  - round_ns: what a round of a step costs beyond its copies and folds: a real copy-in
//    reduce-scatter through the segment (exec/shm_steps.hpp, every member at once, 4 or 8
//    rounds of a slot half), less the copies and folds the model charges it at the two rates
//    above, per round. With ranks outnumbering cores a round is a wait for the slowest member's
//    time slice, and a bare flag round (raise, wait for every member's: kept as the floor)
//    misses the copies' share of the cores it waits on: 20 us alone against 0.5-1 ms per round
//    of the real step on 8 ranks of 2 cores (bench/RESULTS.md, "Session 18 (node26)").
// With ranks outnumbering cores the members' copies share the cores, and the figures say so:
// that is what the planner must weigh against the MPI's messages on the same node.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "exec/shm_steps.hpp"
#include "exec/typed.hpp"
#include "measure.hpp"
#include "shm/cma.hpp"
#include "shm/segment.hpp"
#include "shm/wait.hpp"

namespace hier::tune {

bool measure_shm(const Shape& s, bool quick, model::ShmRates& out) {
  if (s.ppn < 2) return false;
  bool failed = false;
  std::unique_ptr<shm::Segment> seg;
  if (shm::members_share_memory(s.node_comm)) seg = shm::open_segment(s.node_comm, shm::kHalfBytes, &failed);
  else failed = true;
  int bad = failed || !seg ? 1 : 0;
  PMPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad) return false;
  seg->unlink_name();  // every member mapped it (the agreement above): nothing left behind
  const int p = seg->members(), me = seg->me();
  const int64_t half = seg->half_bytes();
  const int reps = quick ? 3 : 5;
  std::vector<float> mine(static_cast<size_t>(half / 4), 1.0f), priv(static_cast<size_t>(half / 4), 0.0f);
  // Rounds use half 0 of every slot; the data phases are separated by the barriers of timed().
  const double t_copy = timed(s.node_comm, reps, [&] {
    std::memcpy(seg->slot(me, 0), mine.data(), static_cast<size_t>(half));
    for (int m = 0; m < p; ++m)
      if (m != me) std::memcpy(priv.data(), seg->slot(m, 0), static_cast<size_t>(half));
    asm volatile("" ::"r"(priv.data()) : "memory");
  });
  const double t_reduce = timed(s.node_comm, reps, [&] {
    for (int m = 0; m < p; ++m)
      if (m != me)
        PMPI_Reduce_local(seg->slot(m, 0), mine.data(), static_cast<int>(half / 4), MPI_FLOAT, MPI_SUM);
  });
  // Single copy: each member publishes its buffer's address in its slot's other half, then reads
  // every peer's buffer, a 128 KiB piece at a time as the steps do, into its private one.
  double t_single = -1;
  if (seg->cma()) {
    const auto addr = reinterpret_cast<uint64_t>(mine.data());
    std::memcpy(seg->slot(me, 1), &addr, sizeof addr);
    PMPI_Barrier(s.node_comm);
    const size_t piece = std::min<size_t>(size_t{128} << 10, static_cast<size_t>(half));
    t_single = timed(s.node_comm, reps, [&] {
      for (int m = 0; m < p; ++m) {
        if (m == me) continue;
        uint64_t at = 0;
        std::memcpy(&at, seg->slot(m, 1), sizeof at);
        for (size_t off = 0; off < static_cast<size_t>(half); off += piece)
          if (!shm::cma_read(seg->pid(m), reinterpret_cast<const char*>(at) + off, priv.data(), piece)) t_single = -2;
      }
    });
    int ok = t_single > -2 ? 1 : 0;  // a read refused after the probe agreed: no figure
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, s.node_comm);
    if (!ok) t_single = -1;
  }
  // The real step (after the single-copy figure: it overwrites the slots), with the segment's
  // own round numbers, which the bare flag rounds below then continue: a copy-in
  // reduce-scatter of `step_rounds` slot halves of float input per
  // member (model::step_cost's copy-in: all x copy + all / p x (p - 1) x fold + rounds x round).
  const int step_rounds = quick ? 4 : 8;
  const int64_t piece = step_rounds * half / 4 / p;  // floats of each member's piece
  const double all = static_cast<double>(piece * p * 4);
  std::vector<float> in(static_cast<size_t>(piece * p), 1.0f), res(static_cast<size_t>(piece), 0.0f);
  const exec::TypeInfo info = exec::type_info(MPI_FLOAT);
  const exec::ShmArgs args{reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(res.data()), false, 0, 0,
                           std::vector<int64_t>(static_cast<size_t>(p), piece), {}, &info, MPI_SUM, false};
  const double t_step = timed(s.node_comm, reps, [&] {
    auto st = exec::shm_start(sched::Kind::ReduceScatter, *seg, args);
    if (st) shm::finish(*st);
  });
  const int rounds = quick ? 50 : 200;
  uint64_t round = seg->take_rounds(0) - 1;  // the flags stand at the step's last round
  const double t_rounds = timed(s.node_comm, reps, [&] {
    for (int r = 0; r < rounds; ++r) {
      ++round;
      seg->ready(me).store(round, std::memory_order_release);
      shm::wait_until([&] {
        for (int m = 0; m < p; ++m)
          if (seg->ready(m).load(std::memory_order_acquire) < round) return false;
        return true;
      });
    }
  });
  out.copy_ns_per_byte = 1e9 * t_copy / (static_cast<double>(half) * p);
  out.reduce_ns_per_byte = 1e9 * t_reduce / (static_cast<double>(half) * (p - 1));
  const double work = all * out.copy_ns_per_byte + all / p * (p - 1) * out.reduce_ns_per_byte;
  const double bare = 1e9 * t_rounds / rounds, per_round = (1e9 * t_step - work) / step_rounds;
  out.round_ns = per_round > 0 ? per_round : bare;
  int wr = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &wr);
  if (wr == 0)
    std::fprintf(stderr, "hier-tune: shm: a %d-round reduce-scatter step %.2f ms (copies and folds %.2f ms): %.0f us a round; a bare flag round %.0f us\n",
                 step_rounds, 1e3 * t_step, work / 1e6, per_round / 1e3, bare / 1e3);
  out.single_ns_per_byte = t_single < 0 ? -1 : 1e9 * t_single / (static_cast<double>(half) * (p - 1));
  out.members = p;
  // Node 0's figures are the file's (rank 0 writes it).
  double v[4] = {out.copy_ns_per_byte, out.reduce_ns_per_byte, out.round_ns, out.single_ns_per_byte};
  PMPI_Bcast(v, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  out.copy_ns_per_byte = v[0], out.reduce_ns_per_byte = v[1], out.round_ns = v[2], out.single_ns_per_byte = v[3];
  return true;
}

}  // namespace hier::tune
