// A pipelined quantized allreduce on device buffers (HIER_CHUNK, HIER_QUANT=allreduce=int8): the
// kernels of one chunk run on the device while another chunk's messages are issued and cross
// (docs/device-buffers.md, "State per device, per communicator, and no waiting inside a call").
// The executor waits for the kernels of a wave's earlier waves once, when the wave starts; inside
// the wave, a message step does not wait for the local steps queued before it (an older chunk's
// dequantize, the next chunk's quantize: other chunks' memory).
// Evidence from the emulator's record (tests/device/fake_gpu.h): each stream operation's queue,
// begin and end times, and the start time of every PMPI call libhier made meanwhile. Some PMPI
// call of the call must start while a kernel queued before it is still pending (queued, not
// ended). Waiting for the whole stream before each message step, as the executor did, makes that
// impossible: every kernel queued before the call ended before it. Every stream operation is
// slowed (fake_gpu_slow) so that a kernel stays pending far longer than the host takes from
// queueing it to its next PMPI call.
// Run GPU-aware (the messages on device memory) and staged (an MPI that is not GPU-aware: the
// messages wait for their own staging copies' events).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

#include "../support/world.hpp"
#include "fake_gpu.h"

namespace {

constexpr int kSlowUs = 3000;  // each stream operation's wait: far above a host step's time

std::vector<float> values(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)) + rank);
  return v;
}

TEST(DevicePipeline, KernelsRunWhileAnotherChunkCrosses) {
  const int me = hier::test::rank_(), np = hier::test::size_();
  constexpr size_t n = 64 * 1024;  // 256 KiB of floats: 4 chunks of HIER_CHUNK=64k
  const std::vector<float> x = values(me, n);
  float* send = static_cast<float*>(fake_gpu_alloc(n * sizeof(float), 0));
  float* recv = static_cast<float*>(fake_gpu_alloc(n * sizeof(float), 0));
  fake_gpu_copy(send, x.data(), n * sizeof(float));
  // The schedule's miss (planning, reservations) outside the record.
  ASSERT_EQ(MPI_Allreduce(send, recv, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  fake_gpu_slow(kSlowUs);
  fake_gpu_trace(1);
  const double t0 = MPI_Wtime();
  const int rc = MPI_Allreduce(send, recv, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const double ms = (MPI_Wtime() - t0) * 1e3;
  fake_gpu_trace(0);
  fake_gpu_slow(0);
  ASSERT_EQ(rc, MPI_SUCCESS);
  if (me == 0) std::printf("the call took %.1f ms (every stream operation slowed by %d us)\n", ms, kSlowUs);

  std::vector<float> got(n);
  fake_gpu_copy(got.data(), recv, n * sizeof(float));
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double want = np * std::sin(0.001 * static_cast<double>(i)) + np * (np - 1) / 2.0;
    worst = std::max(worst, std::fabs(got[i] - want));
  }
  EXPECT_LT(worst, 0.1) << "the quantized sum is far off";

  std::vector<FakeGpuOp> ops(1 << 14);
  ops.resize(static_cast<size_t>(fake_gpu_trace_read(ops.data(), static_cast<int>(ops.size()))));
  std::vector<FakeGpuMpiCall> calls(1 << 12);
  calls.resize(static_cast<size_t>(fake_gpu_trace_mpi(calls.data(), static_cast<int>(calls.size()))));
  size_t kernels = 0, overlapped = 0;
  for (const FakeGpuOp& k : ops) {
    if (std::strcmp(k.what, "kernel") != 0) continue;
    ++kernels;
    for (const FakeGpuMpiCall& c : calls)
      if (k.q_ns < c.t_ns && c.t_ns < k.t1_ns) {
        ++overlapped;
        break;
      }
  }
  std::ostringstream seen;
  for (const FakeGpuMpiCall& c : calls) seen << ' ' << c.name;
  ASSERT_GT(kernels, 0u) << "no kernel ran: the call was not quantized on the device";
  ASSERT_GE(calls.size(), 2u) << "the call issued fewer than two messages: not pipelined?" << seen.str();
  EXPECT_GT(overlapped, 0u) << "every PMPI call started only after all the kernels queued before it had ended ("
                            << kernels << " kernels, " << calls.size() << " calls:" << seen.str()
                            << "): the executor waited for the device before each message step";
  fake_gpu_free(send);
  fake_gpu_free(recv);
}

}  // namespace
