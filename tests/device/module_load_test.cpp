// The GPU module is loaded only when the program has a GPU runtime (issue 25: "libhier.so
// dlopens [a backend] only when the matching runtime is already loaded"). Both runs name the
// simulated module in HIER_GPU_MODULE and make the same calls; TEST_EXPECT_MODULE says whether
// its file must be mapped at the end (/proc/self/maps):
//   0  no runtime preloaded: host buffers only (device memory without a runtime is not a program
//      that runs without libhier either); the module must stay unmapped.
//   1  the stand-in CUDA runtime preloaded: the same calls on device buffers, which libhier packs
//      with the module's kernels; it must be mapped (the control that shows the check can fail).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "fake_gpu.h"

namespace {

bool mapped(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(path) != std::string::npos) return true;
  return false;
}

bool runtime_loaded() { return dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) != nullptr; }

TEST(ModuleLoad, OnlyWithARuntime) {
  const char* module = std::getenv("HIER_GPU_MODULE");
  const char* expect = std::getenv("TEST_EXPECT_MODULE");
  ASSERT_TRUE(module && *module && expect && *expect) << "set HIER_GPU_MODULE and TEST_EXPECT_MODULE";
  const bool want = std::strcmp(expect, "1") == 0;
  ASSERT_EQ(runtime_loaded(), want) << "the run's LD_PRELOAD does not match TEST_EXPECT_MODULE";

  // A strided type (every other double): MPI_Pack of it from device memory is a kernel's job.
  MPI_Datatype t;
  MPI_Type_vector(64, 1, 2, MPI_DOUBLE, &t);
  MPI_Type_commit(&t);
  std::vector<double> host(128);
  for (int i = 0; i < 128; ++i) host[i] = i;
  void* buf = host.data();
  if (want) {
    buf = fake_gpu_alloc(sizeof(double) * host.size(), 0);
    fake_gpu_copy(buf, host.data(), sizeof(double) * host.size());
  }
  std::vector<double> packed(64, -1.0);
  int pos = 0;
  ASSERT_EQ(MPI_Pack(buf, 1, t, packed.data(), sizeof(double) * 64, &pos, MPI_COMM_SELF), MPI_SUCCESS);
  EXPECT_EQ(pos, static_cast<int>(sizeof(double) * 64));
  for (int i = 0; i < 64; ++i) ASSERT_EQ(packed[i], 2.0 * i) << i;
  double sum = 1.0;
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (want) fake_gpu_free(buf);
  MPI_Type_free(&t);

  EXPECT_EQ(mapped(module), want) << module << (want ? " not mapped with a runtime" : " mapped without a runtime");
}

}  // namespace
