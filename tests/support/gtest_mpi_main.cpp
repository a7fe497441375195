// GoogleTest main for tests run under mpiexec: every rank runs every test; rank 0 prints the
// usual output, the other ranks print only their failures; the exit code is the same on every
// rank (failed anywhere = failed). MPI starts at HIER_TEST_MPI_THREAD_LEVEL (a compile definition;
// MPI_THREAD_SINGLE by default); a run where the MPI provides less fails instead of silently
// testing nothing.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

namespace {
class FailureOnlyPrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailureOnlyPrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }
 private:
  int rank_;
};
}  // namespace

#ifndef HIER_TEST_MPI_THREAD_LEVEL
#define HIER_TEST_MPI_THREAD_LEVEL MPI_THREAD_SINGLE
#endif

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, HIER_TEST_MPI_THREAD_LEVEL, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < HIER_TEST_MPI_THREAD_LEVEL) {
    std::fprintf(stderr, "[rank %d] MPI_Init_thread provided thread level %d, the test needs %d\n", rank, provided,
                 HIER_TEST_MPI_THREAD_LEVEL);
    MPI_Finalize();
    return 1;
  }
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailureOnlyPrinter(rank));
  }
  int local = RUN_ALL_TESTS();
  int global = 0;
  PMPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return global;
}
