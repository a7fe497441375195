// The calling rank and the size of MPI_COMM_WORLD, for the tests under mpiexec: through PMPI,
// so the tests' own bookkeeping stays outside the interposer they test.
#pragma once

#include <mpi.h>

namespace hier::test {

inline int rank_() {
  int r = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int size_() {
  int s = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

}  // namespace hier::test
