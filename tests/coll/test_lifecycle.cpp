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

// A new communicator inherits its parent's error handler (MPI 4.0, 9.3), through libhier's
// wrappers too: they run the MPI's call under MPI_ERRORS_RETURN (to retry when MPICH runs out of
// context IDs) and must hand the program's handler on, as PMPI_Comm_dup does.
void count_error(MPI_Comm*, int*, ...) {}
TEST(CollLifecycle, NewCommunicatorsInheritTheErrorHandler) {
  MPI_Comm parent;
  ASSERT_EQ(PMPI_Comm_dup(MPI_COMM_WORLD, &parent), MPI_SUCCESS);
  MPI_Errhandler mine;
  ASSERT_EQ(MPI_Comm_create_errhandler(count_error, &mine), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_set_errhandler(parent, mine), MPI_SUCCESS);
  int rank = 0;
  MPI_Comm_rank(parent, &rank);
  MPI_Group all;
  MPI_Comm_group(parent, &all);
  MPI_Comm made[4], reference;
  ASSERT_EQ(MPI_Comm_dup(parent, &made[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_split(parent, rank % 2, rank, &made[1]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_split_type(parent, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &made[2]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_create(parent, all, &made[3]), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Comm_dup(parent, &reference), MPI_SUCCESS);
  MPI_Errhandler want;
  ASSERT_EQ(MPI_Comm_get_errhandler(reference, &want), MPI_SUCCESS);
  EXPECT_EQ(want, mine);  // the MPI's own rule, without libhier
  for (int i = 0; i < 4; ++i) {
    MPI_Errhandler got;
    ASSERT_EQ(MPI_Comm_get_errhandler(made[i], &got), MPI_SUCCESS);
    EXPECT_EQ(got, mine) << "constructor " << i << " (dup, split, split_type, create)";
    MPI_Errhandler_free(&got);
    MPI_Comm_free(&made[i]);
  }
  MPI_Errhandler_free(&want);
  MPI_Comm_free(&reference);
  MPI_Group_free(&all);
  MPI_Errhandler_free(&mine);
  MPI_Comm_free(&parent);
}

}  // namespace
