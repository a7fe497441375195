// What a round of the shared-memory transport costs in synchronization alone, under each waiting
// policy (src/shm/wait.hpp): every rank of MPI_COMM_WORLD (one node) raises its ready flag for
// round t and waits for every other rank's, ROUNDS times; a round is one barrier through the
// segment's flags. Prints microseconds per round, the median of REPS timed repetitions, per
// policy, policies alternated. Run with more ranks than cores to see the starvation a spinning
// waiter causes:
//   mpiexec -n 8 build/openmpi/bench/shm/bench_shm_wait [ROUNDS=2000] [REPS=5]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "shm/segment.hpp"
#include "shm/wait.hpp"

namespace {

struct Named {
  const char* name;
  hier::shm::WaitPolicy p;
};

double rounds_us(hier::shm::Segment& seg, const hier::shm::WaitPolicy& p, int rounds) {
  PMPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < rounds; ++i) {
    const uint64_t t = seg.take_rounds(1);
    seg.ready(seg.me()).store(t, std::memory_order_release);
    hier::shm::wait_until(
        [&] {
          for (int m = 0; m < seg.members(); ++m)
            if (seg.ready(m).load(std::memory_order_acquire) < t) return false;
          return true;
        },
        p);
  }
  double dt = (MPI_Wtime() - t0) * 1e6 / rounds;
  MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return dt;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bool failed = false;
  auto seg = hier::shm::open_segment(MPI_COMM_WORLD, 4096, &failed);
  int bad = failed ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad) {
    if (rank == 0) std::fprintf(stderr, "bench_shm_wait: no segment (ranks on several nodes?)\n");
    MPI_Finalize();
    return 1;
  }
  seg->unlink_name();
  const Named policies[] = {
      {"spin only", {UINT64_MAX / 2, 0, 0}},
      {"yield at once", {0, UINT64_MAX / 2, 0}},
      {"spin 256, yield (libhier)", {}},
      {"spin 256, nap 20us", {256, 0, 20000}},
  };
  std::vector<std::vector<double>> t(std::size(policies));
  for (int r = 0; r < reps; ++r)
    for (size_t k = 0; k < std::size(policies); ++k) t[k].push_back(rounds_us(*seg, policies[k].p, rounds));
  if (rank == 0) {
    std::printf("# bench_shm_wait: %d ranks, %d rounds x %d reps: us per round (median [min max])\n", size, rounds, reps);
    for (size_t k = 0; k < std::size(policies); ++k) {
      std::sort(t[k].begin(), t[k].end());
      std::printf("%-28s %10.2f [%.2f %.2f]\n", policies[k].name, t[k][t[k].size() / 2], t[k].front(), t[k].back());
    }
  }
  MPI_Finalize();
  return 0;
}
