// A segment's name left in /dev/shm by a job killed between the segment's creation and the
// members' agreement (shm/segment.hpp): run by shm_leak.py.
//   shm_leak die   rank 1 kills itself (SIGKILL) right after mapping member 0's segment, before
//                  the agreement: the job dies with the name still there;
//   shm_leak open  a job that opens a segment normally: its creator sweeps the names of dead
//                  creators (shm::sweep_dead_names) before creating its own.
// Linked with libhier's shm layer, no preload: the hook below is open_segment's "shm" point.
#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "shm/segment.hpp"

namespace {
bool g_die = false;
}

extern "C" __attribute__((visibility("default"))) int hier_test_inject(const char* point) {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if (g_die && r == 1 && std::strcmp(point, "shm") == 0) raise(SIGKILL);  // mapped, not yet agreed
  return 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  g_die = argc > 1 && std::strcmp(argv[1], "die") == 0;
  bool failed = false;
  auto seg = hier::shm::open_segment(MPI_COMM_WORLD, hier::shm::kHalfBytes, &failed);
  int bad = failed || !seg ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!bad) seg->unlink_name();
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (me == 0) std::printf("shm_leak: segment %s\n", bad ? "refused" : "opened");
  seg.reset();
  MPI_Finalize();
  return bad;
}
