// The simulated device executes like one (src/gpu/sim_runtime.hpp): blocks and the lanes of a
// block run at the same time, syncthreads() is a barrier that orders shared memory, shuffles and
// ballots are lane-synchronous within a warp, two streams' kernels overlap. The negative control
// (MissingBarrierIsCaught) runs the same kernel without its barrier and must see wrong values.
// FiberLanes: the fast mode the MPI-level device tests use (lanes as fibers taking turns on the
// stream's thread) keeps the same semantics and stops a kernel whose barriers cannot complete.
// Its memory here is ordinary host memory (this file's hooks): the faulting device memory is
// tests/device/fake_gpu.cpp's, exercised by the module's tests. Run under ThreadSanitizer by
// tools/test.sh (the tsan preset's unit tests).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "gpu/sim_runtime.hpp"

// The simulated device's hooks (src/gpu/sim_runtime.hpp), exported from this executable.
extern "C" {
__attribute__((visibility("default"))) void* hier_sim_alloc(size_t n) { return std::aligned_alloc(64, (n + 63) / 64 * 64); }
__attribute__((visibility("default"))) void hier_sim_free(void* p) { std::free(p); }
__attribute__((visibility("default"))) void* hier_sim_alias(const void* p) { return const_cast<void*>(p); }
// Lanes as threads unless a FiberLanes test turns fibers on (the fast mode of the MPI tests).
std::atomic<int> g_fiber_lanes{0};
__attribute__((visibility("default"))) int hier_sim_fiber_lanes(void) { return g_fiber_lanes.load(); }
}

namespace hier::gpu::sim {
namespace {

using namespace std::chrono_literals;

// A stream of its own per test, synchronized at the end of every launch.
struct Launcher {
  Stream s = nullptr;
  Launcher() { EXPECT_EQ(simStreamCreateWithFlags(&s, simStreamNonBlocking), 0); }
  ~Launcher() { simStreamDestroy(s); }
  template <class... P, class... A>
  void operator()(void (*k)(P...), unsigned grid, unsigned block, A... args) {
    ASSERT_EQ(run_kernel(k, grid, block, s, args...), 0);
    ASSERT_EQ(simStreamSynchronize(s), 0);
  }
};

// ---- shape: every lane of every block once, with its own indices ---------------------------------

void shape_kernel(unsigned* seen, unsigned* dims) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  __atomic_fetch_add(&seen[i], 1u, __ATOMIC_RELAXED);
  dims[2 * i] = gridDim.x;
  dims[2 * i + 1] = blockDim.x;
}

TEST(SimDevice, EveryLaneOfEveryBlockRunsOnceWithItsIndices) {
  Launcher run;
  // A launch larger than the device is cut to kMaxGrid x kMaxBlock; a smaller one runs as asked.
  for (auto [grid, block] : {std::pair{4096u, 256u}, std::pair{1u, kWarp}, std::pair{2u, kWarp + 3}}) {
    const unsigned g = std::min(grid, kMaxGrid), b = std::min(block, kMaxBlock);
    std::vector<unsigned> seen(g * b), dims(2 * g * b);
    run(shape_kernel, grid, block, seen.data(), dims.data());
    for (unsigned i = 0; i < g * b; ++i) {
      EXPECT_EQ(seen[i], 1u) << "lane " << i;
      EXPECT_EQ(dims[2 * i], g);
      EXPECT_EQ(dims[2 * i + 1], b);
    }
  }
}

// ---- concurrency: lanes and blocks, two streams ---------------------------------------------------

// Each lane arrives, then waits until every lane of the grid has: only lanes that run at the
// same time get past (run one after another, the first would wait for ever; here 20 s, then it
// gives up and says so).
// Waits until *p reaches `want`, at most 20 s (then counts one in *gave_up).
void await(const unsigned* p, unsigned want, unsigned* gave_up) {
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (__atomic_load_n(p, __ATOMIC_ACQUIRE) < want) {
    if (std::chrono::steady_clock::now() > until) {
      __atomic_fetch_add(gave_up, 1u, __ATOMIC_RELAXED);
      return;
    }
    std::this_thread::yield();
  }
}

void all_at_once_kernel(unsigned* arrived, unsigned* gave_up) {
  __atomic_fetch_add(arrived, 1u, __ATOMIC_ACQ_REL);
  await(arrived, gridDim.x * blockDim.x, gave_up);
}

TEST(SimDevice, LanesAndBlocksRunAtTheSameTime) {
  Launcher run;
  unsigned arrived = 0, gave_up = 0;
  run(all_at_once_kernel, kMaxGrid, kMaxBlock, &arrived, &gave_up);
  EXPECT_EQ(arrived, kMaxGrid * kMaxBlock);
  EXPECT_EQ(gave_up, 0u);
}

// Two kernels on two streams that each wait for the other: they end only if they overlap.
void handshake_kernel(unsigned* mine, const unsigned* theirs, unsigned* gave_up) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  __atomic_store_n(mine, 1u, __ATOMIC_RELEASE);
  await(theirs, 1, gave_up);
}

TEST(SimDevice, TwoStreamsKernelsOverlap) {
  Launcher a, b;
  unsigned fa = 0, fb = 0, gave_up = 0;
  ASSERT_EQ(run_kernel(handshake_kernel, kMaxGrid, kMaxBlock, a.s, &fa, static_cast<const unsigned*>(&fb), &gave_up), 0);
  ASSERT_EQ(run_kernel(handshake_kernel, kMaxGrid, kMaxBlock, b.s, &fb, static_cast<const unsigned*>(&fa), &gave_up), 0);
  ASSERT_EQ(simStreamSynchronize(a.s), 0);
  ASSERT_EQ(simStreamSynchronize(b.s), 0);
  EXPECT_EQ(gave_up, 0u);
}

// ---- syncthreads, and the negative control without it -----------------------------------------------

// Each lane writes its slot of the block's shared memory, then reads its neighbour's (lane ^ 1).
// The odd lanes write 20 ms late, so that without the barrier the even lanes read first, every
// time: an even lane would have to stall 20 ms between its own write and read for the race to
// hide, and all of them at once for the control to pass. The unbarriered kernel's accesses are
// relaxed atomics (the race stays, ThreadSanitizer does not stop the run for it); the barriered
// kernel's are plain, so ThreadSanitizer checks that syncthreads orders them.
template <bool kBarrier>
void neighbour_kernel(int epoch, int* out) {
  int* s = static_cast<int*>(shared_memory());
  const unsigned t = threadIdx.x;
  const int v = epoch * 100000 + static_cast<int>(blockIdx.x * 1000 + t) + 1;
  if (t % 2) std::this_thread::sleep_for(20ms);
  if constexpr (kBarrier) {
    s[t] = v;
    syncthreads();
    out[blockIdx.x * blockDim.x + t] = s[t ^ 1];
  } else {
    __atomic_store_n(&s[t], v, __ATOMIC_RELAXED);
    out[blockIdx.x * blockDim.x + t] = __atomic_load_n(&s[t ^ 1], __ATOMIC_RELAXED);
  }
}

int neighbour_mismatches(bool barrier, int epoch) {
  Launcher run;
  std::vector<int> out(kMaxGrid * kMaxBlock, -1);
  if (barrier) run(neighbour_kernel<true>, kMaxGrid, kMaxBlock, epoch, out.data());
  else run(neighbour_kernel<false>, kMaxGrid, kMaxBlock, epoch, out.data());
  int bad = 0;
  for (unsigned b = 0; b < kMaxGrid; ++b)
    for (unsigned t = 0; t < kMaxBlock; ++t)
      bad += out[b * kMaxBlock + t] != epoch * 100000 + static_cast<int>(b * 1000 + (t ^ 1)) + 1;
  return bad;
}

TEST(SimDevice, SyncthreadsOrdersSharedMemory) {
  for (int epoch = 1; epoch <= 3; ++epoch) EXPECT_EQ(neighbour_mismatches(true, epoch), 0) << "epoch " << epoch;
}

TEST(SimDevice, MissingBarrierIsCaught) {
  // Without syncthreads the even lanes read before their neighbours wrote: stale values.
  const int bad = neighbour_mismatches(false, 7);
  EXPECT_GT(bad, 0) << "the kernel without its barrier read every neighbour's value: lanes did not run together";
  // Then the same kernel with the barrier, on the same block runners: exact again.
  EXPECT_EQ(neighbour_mismatches(true, 8), 0);
}

// Blocks are separate: each block's shared memory is its own while the blocks run together.
void shared_per_block_kernel(int* out) {
  int* s = static_cast<int*>(shared_memory());
  if (threadIdx.x == 0) s[0] = static_cast<int>(blockIdx.x) + 1;
  syncthreads();
  std::this_thread::sleep_for(5ms);  // the other block writes its s[0] meanwhile
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[0];
}

TEST(SimDevice, SharedMemoryIsPerBlock) {
  Launcher run;
  std::vector<int> out(kMaxGrid * kMaxBlock);
  run(shared_per_block_kernel, kMaxGrid, kMaxBlock, out.data());
  for (unsigned i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], static_cast<int>(i / kMaxBlock) + 1) << i;
}

// ---- warp shuffles and ballots ------------------------------------------------------------------------

template <class T>
T lane_value(unsigned block, unsigned t) {
  return static_cast<T>(block * 977 + t * 13 + 5) / static_cast<T>(2);  // x.5 for floating types
}

// out[lane][m] = what shfl_xor(v, m) gave, for m = 0 .. 2 * kWarp - 1 (m >= kWarp: outside the
// warp, the lane's own value); sum = the butterfly sum over the warp.
template <class T>
void shfl_kernel(T* out, T* sum) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const T v = lane_value<T>(blockIdx.x, threadIdx.x);
  for (unsigned m = 0; m < 2 * kWarp; ++m) out[i * 2 * kWarp + m] = shfl_xor(v, static_cast<int>(m));
  T s = v;
  for (unsigned m = kWarp / 2; m > 0; m /= 2) s += shfl_xor(s, static_cast<int>(m));
  sum[i] = s;
}

template <class T>
void check_shfl(unsigned block) {
  Launcher run;
  const unsigned g = kMaxGrid, n = g * block;
  std::vector<T> out(n * 2 * kWarp), sum(n);
  run(shfl_kernel<T>, g, block, out.data(), sum.data());
  for (unsigned bi = 0; bi < g; ++bi)
    for (unsigned t = 0; t < block; ++t) {
      const unsigned i = bi * block + t, base = t / kWarp * kWarp, lanes = std::min(kWarp, block - base);
      T total = 0;
      for (unsigned l = 0; l < lanes; ++l) total += lane_value<T>(bi, base + l);
      for (unsigned m = 0; m < 2 * kWarp; ++m) {
        const unsigned src = (t - base) ^ m;
        const T want = src < lanes ? lane_value<T>(bi, base + src) : lane_value<T>(bi, t);
        ASSERT_EQ(out[i * 2 * kWarp + m], want) << "block " << bi << " lane " << t << " mask " << m;
      }
      if (lanes == kWarp) {
        EXPECT_EQ(sum[i], total) << "block " << bi << " lane " << t;
      }
    }
}

TEST(SimDevice, ShflXorIsAButterflyWithinTheWarp) {
  check_shfl<float>(kMaxBlock);
  check_shfl<double>(kMaxBlock);
  check_shfl<int>(kMaxBlock);
  check_shfl<unsigned>(kMaxBlock);
  check_shfl<long long>(kMaxBlock);
  check_shfl<unsigned long long>(kMaxBlock);
  // A block with a partial last warp: a lane outside it keeps its own value.
  check_shfl<int>(kWarp + kWarp / 2);
}

void broadcast_kernel(int* out) {
  const int v = static_cast<int>(threadIdx.x) * 3;
  out[blockIdx.x * blockDim.x + threadIdx.x] = shfl(v, 2);
}

TEST(SimDevice, ShflReadsOneLane) {
  Launcher run;
  std::vector<int> out(kMaxGrid * kMaxBlock);
  run(broadcast_kernel, kMaxGrid, kMaxBlock, out.data());
  for (unsigned i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], static_cast<int>((i % kMaxBlock) / kWarp * kWarp + 2) * 3);
}

void ballot_kernel(unsigned* out) {
  const unsigned t = threadIdx.x;
  out[blockIdx.x * blockDim.x + t] = ballot((t * 7 + blockIdx.x) % 3 == 0);
}

TEST(SimDevice, BallotHasOneBitPerLane) {
  Launcher run;
  for (unsigned block : {kMaxBlock, kWarp + 3}) {
    std::vector<unsigned> out(kMaxGrid * block);
    run(ballot_kernel, kMaxGrid, block, out.data());
    for (unsigned b = 0; b < kMaxGrid; ++b)
      for (unsigned t = 0; t < block; ++t) {
        const unsigned base = t / kWarp * kWarp;
        unsigned want = 0;
        for (unsigned l = base; l < std::min(base + kWarp, block); ++l)
          if ((l * 7 + b) % 3 == 0) want |= 1u << (l - base);
        EXPECT_EQ(out[b * block + t], want) << "block " << b << " lane " << t;
      }
  }
}

// ---- a kernel's bug stops the run with a message rather than a hang --------------------------------

void divergent_barrier_kernel() {
  if (threadIdx.x % 2) syncthreads();
}

TEST(SimDeviceDeathTest, DivergentBarrierStopsTheRun) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Launcher run;
        run(divergent_barrier_kernel, 1, kMaxBlock);
      },
      "lanes of a block met at different places");
}

// ---- lanes as fibers (the MPI tests' fast mode): the same semantics, lanes taking turns ---------

class FiberLanes : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fiber_lanes = 1;
    if (!fiber_lanes()) GTEST_SKIP() << "a sanitizer build: lanes always run as threads";
  }
  void TearDown() override { g_fiber_lanes = 0; }
};

TEST_F(FiberLanes, SameShapeShufflesBallotsAndBarriers) {
  Launcher run;
  std::vector<unsigned> seen(kMaxGrid * kMaxBlock), dims(2 * kMaxGrid * kMaxBlock);
  run(shape_kernel, 4096u, 256u, seen.data(), dims.data());
  for (unsigned i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i], 1u) << "lane " << i;
    EXPECT_EQ(dims[2 * i], kMaxGrid);
    EXPECT_EQ(dims[2 * i + 1], kMaxBlock);
  }
  check_shfl<int>(kMaxBlock);
  check_shfl<double>(kMaxBlock);
  check_shfl<int>(kWarp + kWarp / 2);
  std::vector<unsigned> votes(kMaxGrid * kMaxBlock);
  run(ballot_kernel, kMaxGrid, kMaxBlock, votes.data());
  for (unsigned b = 0; b < kMaxGrid; ++b)
    for (unsigned t = 0; t < kMaxBlock; ++t) {
      unsigned want = 0;
      for (unsigned l = t / kWarp * kWarp; l < t / kWarp * kWarp + kWarp; ++l)
        if ((l * 7 + b) % 3 == 0) want |= 1u << (l % kWarp);
      EXPECT_EQ(votes[b * kMaxBlock + t], want) << "block " << b << " lane " << t;
    }
  EXPECT_EQ(neighbour_mismatches(true, 1), 0);
}

TEST_F(FiberLanes, MissingBarrierIsCaught) {
  // Lanes take turns in order: lane 0 reads lane 1's slot before lane 1 ran.
  EXPECT_GT(neighbour_mismatches(false, 3), 0);
  EXPECT_EQ(neighbour_mismatches(true, 4), 0);
}

// Even lanes wait at syncthreads, odd lanes in a shuffle: neither barrier can complete.
void stuck_kernel() {
  if (threadIdx.x % 2) (void)shfl_xor(1, 1);
  else syncthreads();
}

using FiberLanesDeathTest = FiberLanes;

TEST_F(FiberLanesDeathTest, DivergentBarrierStopsTheRun) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Launcher run;
        run(divergent_barrier_kernel, 1, kMaxBlock);
      },
      "lanes of a block met at different places");
}

TEST_F(FiberLanesDeathTest, BarriersThatCannotCompleteStopTheRun) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Launcher run;
        run(stuck_kernel, 1, kMaxBlock);
      },
      "every lane of a block waits at a barrier that the others never reach");
}

}  // namespace
}  // namespace hier::gpu::sim
