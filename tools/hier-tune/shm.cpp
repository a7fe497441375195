// hier-tune's shared-memory segment figures (the tune file's "shm" section, model::ShmRates):
// on a real segment of each node's communicator (shm/segment.hpp, as HIER_SHM builds them), every
// member at once, as a schedule's node step runs:
//  - copy_ns_per_byte: a member copies its buffer into its slot and every peer's slot out;
//  - reduce_ns_per_byte: a member folds every peer's slot into its buffer (MPI_Reduce_local,
//    float sum, what exec/shm_steps.cpp runs);
//  - single_ns_per_byte: where the members may read each other's memory (Segment::cma()), a
//    member reads a buffer of every peer's through the kernel (shm/cma.hpp), as the single-copy
//    steps do;
//  - round_ns: one flag round (raise one's ready flag, wait for every member's) under libhier's
//    waiting policy (shm/wait.hpp).
// With ranks outnumbering cores the members' copies share the cores, and the figures say so:
// that is what the planner must weigh against the MPI's messages on the same node.
#include <algorithm>
#include <cstring>

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
  const int rounds = quick ? 50 : 200;
  uint64_t round = 0;
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
  out.round_ns = 1e9 * t_rounds / rounds;
  out.single_ns_per_byte = t_single < 0 ? -1 : 1e9 * t_single / (static_cast<double>(half) * (p - 1));
  out.members = p;
  // Node 0's figures are the file's (rank 0 writes it).
  double v[4] = {out.copy_ns_per_byte, out.reduce_ns_per_byte, out.round_ns, out.single_ns_per_byte};
  PMPI_Bcast(v, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  out.copy_ns_per_byte = v[0], out.reduce_ns_per_byte = v[1], out.round_ns = v[2], out.single_ns_per_byte = v[3];
  return true;
}

}  // namespace hier::tune
