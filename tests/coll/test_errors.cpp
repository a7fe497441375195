// Errors under HIER_ALGO=hier behave as the MPI alone makes them behave:
// - arguments the MPI rejects (a bad root, a negative count) give the error class PMPI gives for
//   the same call, through the communicator's error handler;
// - an error inside a hierarchical schedule (injected: HIER_TEST_FAIL=run@*, or =throw for a C++
//   exception inside libhier) reaches the user's error handler on the user's communicator, with
//   the same code the call returns, on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

namespace {

int g_handler_calls = 0;
int g_handler_code = MPI_SUCCESS;
void count_errors(MPI_Comm*, int* code, ...) {
  ++g_handler_calls;
  g_handler_code = *code;
}

int error_class(int rc) {
  int c = rc;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &c);
  return c;
}

// A duplicate of MPI_COMM_WORLD whose errors return (MPI_ERRORS_RETURN), freed at scope end.
struct ReturningComm {
  MPI_Comm c = MPI_COMM_NULL;
  ReturningComm() {
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  }
  ~ReturningComm() { MPI_Comm_free(&c); }
};

const char* injected() {
  const char* e = std::getenv("HIER_TEST_FAIL");
  return e ? e : "";
}

TEST(Errors, BadRootAsTheMpi) {
  if (std::strstr(injected(), "run")) GTEST_SKIP() << "argument errors are checked without injection";
  ReturningComm rc;
  int size = 0;
  MPI_Comm_size(rc.c, &size);
  std::vector<int> buf(1024, 1), out(1024, 0);
  const int mine = MPI_Bcast(buf.data(), 1024, MPI_INT, size, rc.c);
  const int theirs = PMPI_Bcast(buf.data(), 1024, MPI_INT, size, rc.c);
  EXPECT_NE(mine, MPI_SUCCESS);
  EXPECT_EQ(error_class(mine), error_class(theirs));
  const int mine_r = MPI_Reduce(buf.data(), out.data(), 1024, MPI_INT, MPI_SUM, -2, rc.c);
  const int theirs_r = PMPI_Reduce(buf.data(), out.data(), 1024, MPI_INT, MPI_SUM, -2, rc.c);
  EXPECT_NE(mine_r, MPI_SUCCESS);
  EXPECT_EQ(error_class(mine_r), error_class(theirs_r));
}

TEST(Errors, BadCountAsTheMpi) {
  if (std::strstr(injected(), "run")) GTEST_SKIP() << "argument errors are checked without injection";
  ReturningComm rc;
  // MPI_Bcast: both MPIs check its count (MPICH 4.0.2 does not check a negative count in
  // MPI_Allreduce or MPI_Reduce: it crashes there, with or without libhier).
  std::vector<int> buf(16, 1);
  const int mine = MPI_Bcast(buf.data(), -1, MPI_INT, 0, rc.c);
  const int theirs = PMPI_Bcast(buf.data(), -1, MPI_INT, 0, rc.c);
  EXPECT_NE(mine, MPI_SUCCESS);
  EXPECT_EQ(error_class(mine), error_class(theirs));
}

// Without injection: the handler is never called and the result is right. With run@*: the
// call's code is MPI_ERR_OTHER (MPI_ERR_NO_MEM when the injection throws), the handler saw it.
TEST(Errors, ScheduleErrorReachesTheUsersHandler) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Errhandler eh;
  MPI_Comm_create_errhandler(count_errors, &eh);
  MPI_Comm_set_errhandler(c, eh);
  int size = 0, rank = 0;
  MPI_Comm_size(c, &size);
  MPI_Comm_rank(c, &rank);
  const int n = 4099;
  std::vector<long> in(n), out(n, 0);
  std::iota(in.begin(), in.end(), rank);
  g_handler_calls = 0;
  const int rc = MPI_Allreduce(in.data(), out.data(), n, MPI_LONG, MPI_SUM, c);
  const bool inject = std::strstr(injected(), "run") != nullptr;
  const bool throws = std::strstr(injected(), "throw") != nullptr;
  if (!inject) {
    EXPECT_EQ(rc, MPI_SUCCESS);
    EXPECT_EQ(g_handler_calls, 0);
    for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], static_cast<long>(size) * i + static_cast<long>(size) * (size - 1) / 2);
  } else {
    EXPECT_EQ(error_class(rc), throws ? MPI_ERR_NO_MEM : MPI_ERR_OTHER);
    EXPECT_EQ(g_handler_calls, 1);
    EXPECT_EQ(g_handler_code, rc);
  }
  MPI_Comm_free(&c);
  MPI_Errhandler_free(&eh);
}

}  // namespace
