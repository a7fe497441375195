// The GPU module's state per device and per communicator (issue 36, items 2 and 3), on the
// simulated machine with FAKE_GPU_DEVICES=2 (tests/device/fake_gpu.cpp): one current device per
// thread, memory and streams owned by a device, and a simulated module that refuses work queued
// on a stream of another device than the current one, or a kernel handed another device's memory
// (src/gpu/sim_device.cpp). A GPU-aware MPI, HIER_ALGO=hier, the progress thread.
//   - Quantized allreduces (HIER_QUANT=allreduce=int8: their quantize kernels run on the device)
//     on buffers of either device, made while the other one is current, blocking and nonblocking
//     (two outstanding, one per device, completed by the progress thread): each runs on its
//     buffers' device (its kernels and copies are that device's stream operations) and gives the
//     sum, and the caller's current device is unchanged after it.
//   - Two communicators' quantized allreduces from two threads at once: their kernels run on two
//     streams, and the emulator's timestamps show them overlapping. The first stream operation is
//     held (fake_gpu_gate) until one of another stream ends: where both shared a stream, the other
//     could not start behind it, and the spans would not overlap.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "../support/world.hpp"
#include "fake_gpu.h"

namespace {

// n values of T in device memory of device d (allocated with d current).
template <class T>
struct OnDevice {
  T* p;
  size_t n;
  OnDevice(int d, const std::vector<T>& v) : n(v.size()) {
    const int cur = fake_gpu_get_device();
    EXPECT_EQ(fake_gpu_set_device(d), 0);
    p = static_cast<T*>(fake_gpu_alloc(n * sizeof(T), 0));
    fake_gpu_set_device(cur);
    fake_gpu_copy(p, v.data(), n * sizeof(T));
  }
  ~OnDevice() { fake_gpu_free(p); }
  std::vector<T> get() const {
    std::vector<T> v(n);
    fake_gpu_copy(v.data(), p, n * sizeof(T));
    return v;
  }
};

// Rank r's values of call `salt`, and their sum over `size` ranks; quantized on the way
// (HIER_QUANT=allreduce=int8), so the sums are compared within the int8 error.
std::vector<float> values(int rank, int salt, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.01 * static_cast<double>(i + 37 * salt)) + rank);
  return v;
}
void expect_sum(const std::vector<float>& got, int size, int salt, const char* what) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = size * std::sin(0.01 * static_cast<double>(i + 37 * salt)) + size * (size - 1) / 2.0;
    worst = std::max(worst, std::fabs(got[i] - want));
  }
  EXPECT_LT(worst, 0.2) << what << ": the quantized sum is far off";
}

TEST(Devices, EachCallRunsOnItsBuffersDevice) {
  ASSERT_EQ(fake_gpu_device_count(), 2) << "run with FAKE_GPU_DEVICES=2";
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  const int me = hier::test::rank_(), np = hier::test::size_();
  constexpr size_t n = 4096;
  // Blocking, on device 0, 1, 0, 1, each while the other device is current. (The first call
  // also makes the process's state on the device current then: device 1.)
  for (int round = 0; round < 4; ++round) {
    const int d = round % 2, other = 1 - d;
    OnDevice<float> send(d, values(me, round, n)), recv(d, std::vector<float>(n, -1));
    ASSERT_EQ(fake_gpu_set_device(other), 0);
    const long before = fake_gpu_ops_on(d), before_other = fake_gpu_ops_on(other);
    ASSERT_EQ(MPI_Allreduce(send.p, recv.p, static_cast<int>(n), MPI_FLOAT, MPI_SUM, c), MPI_SUCCESS) << "round " << round;
    expect_sum(recv.get(), np, round, "blocking");
    EXPECT_EQ(fake_gpu_get_device(), other) << "the caller's current device is left as it was";
    EXPECT_GT(fake_gpu_ops_on(d), before) << "round " << round << ": libhier's kernels ran on the buffers' device";
    if (round > 0) {
      EXPECT_EQ(fake_gpu_ops_on(other), before_other) << "round " << round << ": nothing ran on the other device";
    }
  }
  // Nonblocking: one request per device outstanding together, started with the other device
  // current, completed (by the progress thread or the waits) with device 0 current.
  {
    OnDevice<float> s0(0, values(me, 10, n)), r0(0, std::vector<float>(n, -1));
    OnDevice<float> s1(1, values(me, 11, n)), r1(1, std::vector<float>(n, -1));
    MPI_Request q[2];
    const long before0 = fake_gpu_ops_on(0), before1 = fake_gpu_ops_on(1);
    ASSERT_EQ(fake_gpu_set_device(1), 0);
    ASSERT_EQ(MPI_Iallreduce(s0.p, r0.p, static_cast<int>(n), MPI_FLOAT, MPI_SUM, c, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(fake_gpu_set_device(0), 0);
    ASSERT_EQ(MPI_Iallreduce(s1.p, r1.p, static_cast<int>(n), MPI_FLOAT, MPI_SUM, c, &q[1]), MPI_SUCCESS);
    EXPECT_EQ(fake_gpu_get_device(), 0);
    ASSERT_EQ(MPI_Waitall(2, q, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(fake_gpu_get_device(), 0) << "the caller's current device is left as it was";
    expect_sum(r0.get(), np, 10, "nonblocking on device 0");
    expect_sum(r1.get(), np, 11, "nonblocking on device 1");
    EXPECT_GT(fake_gpu_ops_on(0), before0);
    EXPECT_GT(fake_gpu_ops_on(1), before1);
  }
  MPI_Comm_free(&c);
}

TEST(Devices, TwoCommunicatorsOverlapOnTheirOwnStreams) {
  MPI_Comm c[2];
  for (MPI_Comm& x : c) {
    MPI_Comm_dup(MPI_COMM_WORLD, &x);
    MPI_Comm_set_errhandler(x, MPI_ERRORS_RETURN);
  }
  const int me = hier::test::rank_(), np = hier::test::size_();
  constexpr size_t n = 8192;  // quantized (HIER_QUANT=allreduce=int8, HIER_ALGO=hier)
  const std::vector<float> x = values(me, 0, n);
  OnDevice<float> send0(0, x), send1(0, x), recv0(0, std::vector<float>(n)), recv1(0, std::vector<float>(n));
  auto call = [&](int k, int* rc) {
    *rc = MPI_Allreduce(k ? send1.p : send0.p, k ? recv1.p : recv0.p, static_cast<int>(n), MPI_FLOAT, MPI_SUM, c[k]);
  };
  int rc[2] = {-1, -1};
  call(0, &rc[0]);  // each communicator's first call (its schedule's miss) alone
  call(1, &rc[1]);
  ASSERT_EQ(rc[0], MPI_SUCCESS);
  ASSERT_EQ(rc[1], MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  fake_gpu_trace(1);
  fake_gpu_gate();
  std::thread t0(call, 0, &rc[0]), t1(call, 1, &rc[1]);
  t0.join();
  t1.join();
  fake_gpu_trace(0);
  ASSERT_EQ(rc[0], MPI_SUCCESS);
  ASSERT_EQ(rc[1], MPI_SUCCESS);
  expect_sum(recv0.get(), np, 0, "communicator 0");
  expect_sum(recv1.get(), np, 0, "communicator 1");
  std::vector<FakeGpuOp> ops(1 << 16);
  ops.resize(static_cast<size_t>(fake_gpu_trace_read(ops.data(), static_cast<int>(ops.size()))));
  bool overlap = false;
  size_t streams = 0;
  std::vector<const void*> seen;
  for (const FakeGpuOp& a : ops) {
    if (std::find(seen.begin(), seen.end(), a.stream) == seen.end()) seen.push_back(a.stream);
    for (const FakeGpuOp& b : ops)
      if (a.stream != b.stream && a.t0_ns < b.t1_ns && b.t0_ns < a.t1_ns) overlap = true;
  }
  streams = seen.size();
  EXPECT_GE(streams, 2u) << "the two communicators' calls ran on one stream";
  EXPECT_TRUE(overlap) << "no two stream operations of the two calls overlapped (" << ops.size() << " operations on "
                       << streams << " streams)";
  for (MPI_Comm& x : c) MPI_Comm_free(&x);
}

}  // namespace
