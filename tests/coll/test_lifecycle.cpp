// Level communicators live and die with the user's communicator: 1000 dup / use / free cycles
// (MPICH has ~2k context ids, so leaked level communicators make this fail outright; the report
// check after the run asserts that no context or level communicator is left), splits, and
// intercommunicators (flat).
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

namespace {

TEST(CollLifecycle, DupUseFreeCycles) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<int> in(64, rank + 1), out(64), ref(64);
  for (int k = 0; k < 1000; ++k) {
    MPI_Comm c;
    ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &c), MPI_SUCCESS);
    ASSERT_EQ(MPI_Allreduce(in.data(), out.data(), 64, MPI_INT, MPI_SUM, c), MPI_SUCCESS);
    EXPECT_EQ(out[0], size * (size + 1) / 2);
    ASSERT_EQ(MPI_Comm_free(&c), MPI_SUCCESS);
  }
}

TEST(CollLifecycle, SplitsAndSubcommunicators) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int k = 0; k < 50; ++k) {
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, (k % 2) ? -rank : rank, &c);
    int n, r;
    MPI_Comm_size(c, &n);
    MPI_Comm_rank(c, &r);
    std::vector<int> in(33, r), got(33 * n), ref(33 * n);
    MPI_Allgather(in.data(), 33, MPI_INT, got.data(), 33, MPI_INT, c);
    PMPI_Allgather(in.data(), 33, MPI_INT, ref.data(), 33, MPI_INT, c);
    EXPECT_EQ(got, ref);
    MPI_Bcast(got.data(), 33, MPI_INT, n - 1, c);
    MPI_Barrier(c);
    MPI_Comm_free(&c);
  }
}

TEST(CollLifecycle, IntercommunicatorGoesFlat) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "needs two groups";
  MPI_Comm local, inter;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &local);
  MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 42, &inter);
  int remote;
  MPI_Comm_remote_size(inter, &remote);
  // Allreduce on an intercommunicator: each group gets the other group's sum.
  int mine = rank + 1, got = 0, ref = 0;
  EXPECT_EQ(MPI_Allreduce(&mine, &got, 1, MPI_INT, MPI_SUM, inter), MPI_SUCCESS);
  EXPECT_EQ(PMPI_Allreduce(&mine, &ref, 1, MPI_INT, MPI_SUM, inter), MPI_SUCCESS);
  EXPECT_EQ(got, ref);
  MPI_Barrier(inter);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&local);
}

}  // namespace
