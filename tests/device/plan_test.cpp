// The planner follows the tune file's device rates on a device-bound communicator
// (model/cost_device.hpp): one MPI_Allreduce of device buffers, on an MPI that is not GPU-aware
// with the simulated module (its message steps staged through pinned host memory), exact against
// PMPI_Allreduce of the same values in host memory. The ctest runs it with HIER_DEBUG=TRACE and
// two tune files that differ only in their device rates (data/device_rates.json.in), and checks
// how many pipeline chunks rank 0's planner chose (tests/device/CMakeLists.txt says why each).
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "fake_gpu.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int n = 16384;  // 64 KiB of int32: 4 chunks of 16 KiB where the model pipelines it
  std::vector<int> in(n), out(n, -1), want(n);
  for (int i = 0; i < n; ++i) in[i] = (rank + 1) * 1000003 + i * 7;
  const size_t bytes = sizeof(int) * n;
  void* din = fake_gpu_alloc(bytes, 0);
  void* dout = fake_gpu_alloc(bytes, 0);
  fake_gpu_copy(din, in.data(), bytes);
  MPI_Allreduce(din, dout, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  fake_gpu_copy(out.data(), dout, bytes);
  PMPI_Allreduce(in.data(), want.data(), n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const int bad = std::memcmp(out.data(), want.data(), bytes) != 0;
  int any = 0;
  PMPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("plan_test: %s\n", any ? "MISMATCH against PMPI_Allreduce" : "exact");
  fake_gpu_free(din);
  fake_gpu_free(dout);
  MPI_Finalize();
  return any;
}
