// GoogleTest main for the threads tests: like tests/support/gtest_mpi_main.cpp, but MPI starts
// with MPI_THREAD_MULTIPLE (that main asks for MPI_THREAD_SINGLE), and a run where the MPI
// cannot provide it fails instead of silently testing nothing.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

namespace {
// Ranks other than 0 print only their failures, prefixed with the rank.
class RankFailures : public testing::EmptyTestEventListener {
 public:
  explicit RankFailures(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }
 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  int provided = 0, rank = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "[rank %d] MPI_Init_thread provided %d, not MPI_THREAD_MULTIPLE\n", rank, provided);
    MPI_Finalize();
    return 1;
  }
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailures(rank));
  }
  const int local = RUN_ALL_TESTS();
  int global = 0;
  PMPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);  // failed anywhere = failed
  MPI_Finalize();
  return global;
}
