// The MPI's own nonblocking collectives advanced by libhier's progress thread
// (exec/own_progress.hpp; HIER_PROGRESS=thread+mpi, HIER_ALGO=flat so that every call is the MPI's).
// Rank by rank: MPI_Iallreduce of 64 Ki ints (256 KiB: several rounds of the MPI's algorithm, each
// needing a progress call), then no MPI call for up to OWN_PROGRESS_S seconds while the receive
// buffer is watched for the sum; then MPI_Wait and the exact check.
// OWN_PROGRESS_EXPECT=1: the sum must appear before MPI_Wait (the thread advanced the MPI's call).
// =0: it must not (the negative control, HIER_PROGRESS=thread: the thread advances libhier's own
// requests only, and the MPIs here progress a collective only inside the program's calls).
// Unset: not judged.
// Reading the buffer before the wait is outside the standard; it only observes, and the result
// is checked after MPI_Wait as usual.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "../support/world.hpp"

namespace {

double env_seconds(const char* name, double dflt) {
  const char* v = std::getenv(name);
  return v ? std::atof(v) : dflt;
}

// Whether every value of r holds its sum (relaxed atomic loads: the MPI may be writing them).
bool summed(const std::vector<int>& r, int np) {
  for (size_t i = 0; i < r.size(); ++i) {
    const int want = static_cast<int>(i % 1000) * np + np * (np - 1) / 2;
    if (__atomic_load_n(&r[i], __ATOMIC_RELAXED) != want) return false;
  }
  return true;
}

TEST(OwnProgress, MpiCollectiveAdvancesWhileTheProgramComputes) {
  const int me = hier::test::rank_(), np = hier::test::size_();
  constexpr size_t n = 64 * 1024;
  std::vector<int> s(n), r(n, -1);
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<int>(i % 1000) + me;
  const double limit = env_seconds("OWN_PROGRESS_S", 3.0);
  const char* expect = std::getenv("OWN_PROGRESS_EXPECT");
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Request q;
  ASSERT_EQ(MPI_Iallreduce(s.data(), r.data(), static_cast<int>(n), MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q), MPI_SUCCESS);
  const auto t0 = std::chrono::steady_clock::now();
  bool early = false;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < limit) {
    if ((early = summed(r, np))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the program "computes": no MPI call
  }
  const double seen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(MPI_Wait(&q, MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_TRUE(summed(r, np)) << "the sum after MPI_Wait is wrong";
  if (me == 0) std::printf("rank 0: the sum %s before MPI_Wait (%.3f s)\n", early ? "appeared" : "did not appear", seen_s);
  // Every rank's view, so that the verdict does not hang on one rank's timing.
  int mine = early ? 1 : 0, all = 0, any = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (expect && expect[0] == '1') {
    EXPECT_EQ(all, 1) << "on some rank the MPI's MPI_Iallreduce did not complete in " << limit
                      << " s without the program's MPI calls: nothing advanced it";
  }
  if (expect && expect[0] == '0') {
    EXPECT_EQ(any, 0) << "the MPI's MPI_Iallreduce completed without the program's MPI calls and without "
                         "libhier's thread: this negative control cannot tell the thread's effect here";
  }
}

}  // namespace
