// Mixed calls: in one collective some ranks pass host memory and others device memory (the
// stand-in of fake_gpu.h, PROT_NONE to host code), or one rank sends from one kind and receives
// into the other. Every collective libhier rewrites must give, byte for byte, the result of the
// same call on host buffers: the MPI's own (PMPI) for integers, the same call through libhier on
// host buffers for float sums (the same schedule, so the same bits), identical on every rank.
// Run (tests/device/CMakeLists.txt) on the staged path (FAKE_GPU_AWARE=0: the MPI faults on a
// device pointer, so libhier must copy) and the GPU-aware one (FAKE_GPU_AWARE=1).
// FAKE_GPU_LATE=<libcuda.so.1>: the runtime is dlopen'ed after MPI_Init and after
// MPI_COMM_WORLD's first collective agreed on "no GPU" (as PyTorch / CuPy load theirs), then
// device buffers are used, on MPI_COMM_WORLD and on a communicator created after the load.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "fake_gpu.h"

namespace {

int rank_of(MPI_Comm c) {
  int r = 0;
  PMPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c) {
  int s = 0;
  PMPI_Comm_size(c, &s);
  return s;
}

// Which buffers of a rank are device memory.
struct Pattern {
  const char* name;
  bool (*send_dev)(int rank);
  bool (*recv_dev)(int rank);
};
const Pattern kPatterns[] = {
    {"odd ranks on the device", [](int r) { return r % 2 == 1; }, [](int r) { return r % 2 == 1; }},
    {"rank 0 alone on the device", [](int r) { return r == 0; }, [](int r) { return r == 0; }},
    {"send and receive on different kinds", [](int r) { return r % 2 == 0; }, [](int r) { return r % 2 == 1; }},
};

// "Device memory" is mapped once per slot (fake_gpu.cpp keeps at most 256 regions) and reused.
constexpr size_t kSlotBytes = size_t{1} << 20;
char* device_slot(int slot) {
  static char* slots[3] = {};
  if (!slots[slot]) slots[slot] = static_cast<char*>(fake_gpu_alloc(kSlotBytes, 0));
  return slots[slot];
}

// A buffer in host or device memory, filled with `init` (its bytes; zeros if shorter).
class Buf {
 public:
  Buf(bool device, size_t bytes, int slot, const void* init = nullptr) : dev_(device), n_(bytes) {
    std::vector<char> start(bytes ? bytes : 1, 0);
    if (init) std::memcpy(start.data(), init, bytes);
    if (dev_) {
      if (bytes > kSlotBytes) std::abort();
      p_ = device_slot(slot);
      fake_gpu_copy(p_, start.data(), start.size());
    } else {
      host_ = start;
      p_ = host_.data();
    }
  }
  void* ptr() const { return p_; }
  std::vector<char> bytes() const {
    std::vector<char> out(n_);
    if (n_) fake_gpu_copy(out.data(), p_, n_);  // a host pointer is copied as is
    return out;
  }

 private:
  bool dev_;
  size_t n_;
  char* p_ = nullptr;
  std::vector<char> host_;
};

template <class T>
std::vector<char> as_bytes(const std::vector<T>& v) {
  std::vector<char> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<int> ints(size_t n, int salt) {
  std::vector<int> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int>(i * 7919 + salt * 104729 + 3);
  return v;
}
std::vector<float> floats(size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37 + salt * 11) % 1000) * 0.01f - 3.3f;
  return v;
}

// Small counts (0, 1, a prime) beside one large one, where the collective's cost allows.
const int kCounts[] = {0, 1, 7};
constexpr int kLarge = 65537;

// The communicators every test runs on: MPI_COMM_WORLD, and with FAKE_GPU_LATE one made after
// the runtime was loaded.
std::vector<MPI_Comm>& comms() {
  static std::vector<MPI_Comm> c{MPI_COMM_WORLD};
  return c;
}

// Before any test (after MPI_Init): with FAKE_GPU_LATE, the runtime arrives late.
class LateRuntime : public testing::Environment {
 public:
  void SetUp() override {
    const char* late = std::getenv("FAKE_GPU_LATE");
    if (!late) return;
    // MPI_COMM_WORLD's context is built (and agrees on "no GPU") at its first collective ...
    int one = 1, sum = 0;
    ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(sum, size_of(MPI_COMM_WORLD));
    // ... then the program loads its GPU runtime, as `import torch` after MPI_Init does.
    ASSERT_NE(dlopen(late, RTLD_NOW | RTLD_GLOBAL), nullptr) << dlerror();
    usleep(250 * 1000);  // past libhier's re-probe interval (100 ms)
    comms().push_back(MPI_COMM_NULL);
    ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comms().back()), MPI_SUCCESS);  // agrees with the runtime present
  }
  void TearDown() override {
    for (size_t i = 1; i < comms().size(); ++i) MPI_Comm_free(&comms()[i]);
    comms().resize(1);
  }
};
testing::Environment* const kLateRuntime = testing::AddGlobalTestEnvironment(new LateRuntime);

class Mixed : public testing::TestWithParam<int> {
 protected:
  const Pattern& pattern() const { return kPatterns[GetParam()]; }
  bool sdev(MPI_Comm c) const { return pattern().send_dev(rank_of(c)); }
  bool rdev(MPI_Comm c) const { return pattern().recv_dev(rank_of(c)); }
};

#define FOR_EACH_COMM for (MPI_Comm c : comms())
#define WHERE(n) "comm " << (c == MPI_COMM_WORLD ? "world" : "dup") << ", " << pattern().name << ", count " << (n)

TEST_P(Mixed, AllreduceInt) {
  FOR_EACH_COMM {
    std::vector<int> counts(std::begin(kCounts), std::end(kCounts));
    counts.push_back(kLarge);
    for (int n : counts) {
      const auto in = ints(n, rank_of(c));
      std::vector<int> ref(n);
      PMPI_Allreduce(in.data(), ref.data(), n, MPI_INT, MPI_SUM, c);
      Buf s(sdev(c), n * sizeof(int), 0, in.data()), r(rdev(c), n * sizeof(int), 1);
      ASSERT_EQ(MPI_Allreduce(s.ptr(), r.ptr(), n, MPI_INT, MPI_SUM, c), MPI_SUCCESS) << WHERE(n);
      EXPECT_EQ(r.bytes(), as_bytes(ref)) << WHERE(n);
      Buf ip(rdev(c), n * sizeof(int), 1, in.data());
      ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, ip.ptr(), n, MPI_INT, MPI_SUM, c), MPI_SUCCESS) << WHERE(n);
      EXPECT_EQ(ip.bytes(), as_bytes(ref)) << "in place, " << WHERE(n);
    }
  }
}

TEST_P(Mixed, AllreduceFloatBitsOfHostCall) {
  FOR_EACH_COMM {
    for (int n : {1, 7, kLarge}) {
      const auto in = floats(n, rank_of(c));
      std::vector<float> ref(n);
      ASSERT_EQ(MPI_Allreduce(in.data(), ref.data(), n, MPI_FLOAT, MPI_SUM, c), MPI_SUCCESS);
      Buf s(sdev(c), n * sizeof(float), 0, in.data()), r(rdev(c), n * sizeof(float), 1);
      ASSERT_EQ(MPI_Allreduce(s.ptr(), r.ptr(), n, MPI_FLOAT, MPI_SUM, c), MPI_SUCCESS) << WHERE(n);
      EXPECT_EQ(r.bytes(), as_bytes(ref)) << WHERE(n);
    }
  }
}

TEST_P(Mixed, Iallreduce) {
  FOR_EACH_COMM {
    const int n = 7;
    const auto in = ints(n, rank_of(c));
    std::vector<int> ref(n);
    PMPI_Allreduce(in.data(), ref.data(), n, MPI_INT, MPI_MAX, c);
    Buf s(sdev(c), n * sizeof(int), 0, in.data()), r(rdev(c), n * sizeof(int), 1);
    MPI_Request q;
    ASSERT_EQ(MPI_Iallreduce(s.ptr(), r.ptr(), n, MPI_INT, MPI_MAX, c, &q), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&q, MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(r.bytes(), as_bytes(ref)) << WHERE(n);
  }
}

TEST_P(Mixed, Reduce) {
  FOR_EACH_COMM {
    const int root = size_of(c) - 1;
    for (int n : kCounts) {
      const auto in = ints(n, rank_of(c));
      std::vector<int> ref(n);
      PMPI_Reduce(in.data(), ref.data(), n, MPI_INT, MPI_SUM, root, c);
      Buf s(sdev(c), n * sizeof(int), 0, in.data()), r(rdev(c), n * sizeof(int), 1);
      ASSERT_EQ(MPI_Reduce(s.ptr(), r.ptr(), n, MPI_INT, MPI_SUM, root, c), MPI_SUCCESS) << WHERE(n);
      if (rank_of(c) == root) {
        EXPECT_EQ(r.bytes(), as_bytes(ref)) << WHERE(n);
      }
    }
  }
}

TEST_P(Mixed, Bcast) {
  FOR_EACH_COMM {
    const int root = 1 % size_of(c);
    for (int n : {0, 1, 7, kLarge}) {
      const auto in = ints(n, 42);
      Buf b(rdev(c), n * sizeof(int), 1, rank_of(c) == root ? in.data() : nullptr);
      ASSERT_EQ(MPI_Bcast(b.ptr(), n, MPI_INT, root, c), MPI_SUCCESS) << WHERE(n);
      EXPECT_EQ(b.bytes(), as_bytes(in)) << WHERE(n);
      Buf ib(sdev(c), n * sizeof(int), 0, rank_of(c) == root ? in.data() : nullptr);
      MPI_Request q;
      ASSERT_EQ(MPI_Ibcast(ib.ptr(), n, MPI_INT, root, c, &q), MPI_SUCCESS);
      ASSERT_EQ(MPI_Wait(&q, MPI_STATUS_IGNORE), MPI_SUCCESS);
      EXPECT_EQ(ib.bytes(), as_bytes(in)) << "Ibcast, " << WHERE(n);
    }
  }
}

TEST_P(Mixed, Allgather) {
  FOR_EACH_COMM {
    const int p = size_of(c);
    for (int n : kCounts) {
      const auto in = ints(n, rank_of(c));
      std::vector<int> ref(static_cast<size_t>(n) * p);
      PMPI_Allgather(in.data(), n, MPI_INT, ref.data(), n, MPI_INT, c);
      Buf s(sdev(c), n * sizeof(int), 0, in.data()), r(rdev(c), ref.size() * sizeof(int), 1);
      ASSERT_EQ(MPI_Allgather(s.ptr(), n, MPI_INT, r.ptr(), n, MPI_INT, c), MPI_SUCCESS) << WHERE(n);
      EXPECT_EQ(r.bytes(), as_bytes(ref)) << WHERE(n);
    }
  }
}

TEST_P(Mixed, Allgatherv) {
  FOR_EACH_COMM {
    const int p = size_of(c), me = rank_of(c);
    for (int n : kCounts) {
      std::vector<int> counts(p), displs(p);
      for (int i = 0; i < p; ++i) counts[i] = n + i % 3;  // uneven, some ranks 0 when n = 0
      std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
      const int total = displs[p - 1] + counts[p - 1];
      const auto in = ints(counts[me], me);
      std::vector<int> ref(total);
      PMPI_Allgatherv(in.data(), counts[me], MPI_INT, ref.data(), counts.data(), displs.data(), MPI_INT, c);
      Buf s(sdev(c), in.size() * sizeof(int), 0, in.data()), r(rdev(c), total * sizeof(int), 1);
      ASSERT_EQ(MPI_Allgatherv(s.ptr(), counts[me], MPI_INT, r.ptr(), counts.data(), displs.data(), MPI_INT, c),
                MPI_SUCCESS)
          << WHERE(n);
      EXPECT_EQ(r.bytes(), as_bytes(ref)) << WHERE(n);
    }
  }
}

TEST_P(Mixed, ReduceScatterBlock) {
  FOR_EACH_COMM {
    const int p = size_of(c);
    for (int n : kCounts) {
      const auto in = ints(static_cast<size_t>(n) * p, rank_of(c));
      std::vector<int> ref(n);
      PMPI_Reduce_scatter_block(in.data(), ref.data(), n, MPI_INT, MPI_SUM, c);
      Buf s(sdev(c), in.size() * sizeof(int), 0, in.data()), r(rdev(c), n * sizeof(int), 1);
      ASSERT_EQ(MPI_Reduce_scatter_block(s.ptr(), r.ptr(), n, MPI_INT, MPI_SUM, c), MPI_SUCCESS) << WHERE(n);
      EXPECT_EQ(r.bytes(), as_bytes(ref)) << WHERE(n);
    }
  }
}

TEST_P(Mixed, ReduceScatter) {
  FOR_EACH_COMM {
    const int p = size_of(c), me = rank_of(c);
    for (int n : kCounts) {
      std::vector<int> counts(p);
      for (int i = 0; i < p; ++i) counts[i] = n + i % 2;
      const int total = std::accumulate(counts.begin(), counts.end(), 0);
      const auto in = ints(total, me);
      std::vector<int> ref(counts[me]);
      PMPI_Reduce_scatter(in.data(), ref.data(), counts.data(), MPI_INT, MPI_SUM, c);
      Buf s(sdev(c), in.size() * sizeof(int), 0, in.data()), r(rdev(c), ref.size() * sizeof(int), 1);
      ASSERT_EQ(MPI_Reduce_scatter(s.ptr(), r.ptr(), counts.data(), MPI_INT, MPI_SUM, c), MPI_SUCCESS) << WHERE(n);
      EXPECT_EQ(r.bytes(), as_bytes(ref)) << WHERE(n);
    }
  }
}

TEST_P(Mixed, Alltoall) {
  FOR_EACH_COMM {
    const int p = size_of(c);
    for (int n : kCounts) {
      const auto in = ints(static_cast<size_t>(n) * p, rank_of(c));
      std::vector<int> ref(in.size());
      PMPI_Alltoall(in.data(), n, MPI_INT, ref.data(), n, MPI_INT, c);
      Buf s(sdev(c), in.size() * sizeof(int), 0, in.data()), r(rdev(c), ref.size() * sizeof(int), 1);
      ASSERT_EQ(MPI_Alltoall(s.ptr(), n, MPI_INT, r.ptr(), n, MPI_INT, c), MPI_SUCCESS) << WHERE(n);
      EXPECT_EQ(r.bytes(), as_bytes(ref)) << WHERE(n);
    }
  }
}

// A persistent collective that libhier does not rewrite (a one-rank communicator has no levels):
// a GPU-aware MPI keeps the device pointers it was given (never started here: the stand-in opens
// device memory only inside its calls); one that is not GPU-aware runs its own persistent
// allreduce on host copies kept with the request ("staged_persistent_mpi", check_mixed_report.py),
// started twice with new input, the device result the input (a sum over one rank).
TEST(MixedPersistent, NotRewrittenOnCopies) {
#if MPI_VERSION >= 4
  const char* aware = std::getenv("FAKE_GPU_AWARE");
  Buf s(true, 4 * sizeof(int), 0), r(true, 4 * sizeof(int), 1);
  MPI_Request q;
  ASSERT_EQ(MPI_Allreduce_init(s.ptr(), r.ptr(), 4, MPI_INT, MPI_SUM, MPI_COMM_SELF, MPI_INFO_NULL, &q), MPI_SUCCESS);
  for (int round = 0; !(aware && aware[0] == '1') && round < 2; ++round) {
    const std::vector<int> in = {round + 1, 2 * round, -3, 7 * round + rank_of(MPI_COMM_WORLD)};
    fake_gpu_copy(s.ptr(), in.data(), sizeof(int) * 4);
    ASSERT_EQ(MPI_Start(&q), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&q, MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(r.bytes(), as_bytes(in)) << "start " << round;
  }
  ASSERT_EQ(MPI_Request_free(&q), MPI_SUCCESS);
#else
  GTEST_SKIP() << "persistent collectives need an MPI 4.0 library";
#endif
}

INSTANTIATE_TEST_SUITE_P(Patterns, Mixed, testing::Range(0, static_cast<int>(std::size(kPatterns))));

}  // namespace
