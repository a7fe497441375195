// Quantized hierarchical MPI_Allreduce (HIER_QUANT=int8|int4, exec/coll_quant.cpp) through the
// preloaded libhier, on MPI_COMM_WORLD under HIER_LEVELS=node:L (cartesian, L consecutive ranks
// per node). Checks: every rank holds the same bytes; every element is within the documented
// bound of a float64 reference computed from all ranks' inputs (gathered with PMPI); NaN and Inf
// inputs give NaN over their block, never a number; integer types, MPI_MAX and MPI_MINLOC stay
// byte-equal to PMPI. The report check (check_report.py --algo) proves the calls ran quantized.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

constexpr int64_t kBlock = 512;  // quant::kDefaultBlock: blocks are [k*512, (k+1)*512) of the buffer

struct World {
  int rank = 0, size = 1, L = 1, N = 1, Q = 127;
};

World world() {
  World w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  const char* lv = std::getenv("HIER_LEVELS");  // "node:L"
  w.L = lv && std::strncmp(lv, "node:", 5) == 0 ? std::atoi(lv + 5) : w.size;
  w.N = w.size / w.L;
  const char* q = std::getenv("HIER_QUANT");
  w.Q = q && std::string(q) == "int4" ? 7 : 127;
  return w;
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Random values with a mix of magnitudes: 1e-3 .. 1e3 changing every 300 values (so that blocks
// hold both small and large values), either sign, and some exact zeros.
double input(int rank, int64_t i, int seed) {
  const uint64_t h = mix((static_cast<uint64_t>(seed) << 48) ^ (static_cast<uint64_t>(rank) << 32) ^ static_cast<uint64_t>(i));
  if (h % 97 == 0) return 0.0;
  const int e = static_cast<int>(mix(static_cast<uint64_t>(i / 300) ^ (static_cast<uint64_t>(seed) << 40)) % 7) - 3;
  const double m = static_cast<double>(h >> 11) / static_cast<double>(uint64_t{1} << 53);  // [0, 1)
  return (h & 1 ? -1.0 : 1.0) * (0.5 + m) * std::pow(10.0, e);
}

template <class T>
MPI_Datatype mpi_type() {
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

// Every rank's result bytes equal rank 0's.
void expect_same_everywhere(const void* buf, size_t bytes, const World& w, const std::string& what) {
  std::vector<char> all(bytes * w.size);
  PMPI_Allgather(buf, static_cast<int>(bytes), MPI_BYTE, all.data(), static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
  for (int r = 1; r < w.size; ++r)
    if (std::memcmp(all.data(), all.data() + bytes * r, bytes) != 0) {
      ADD_FAILURE() << what << ": rank " << r << "'s result differs from rank 0's";
      return;
    }
}

// The stated bound (docs/collectives.md, "Quantized allreduce"), for element i of block k:
//   A = sum over nodes m of max over block k of |partial sum of node m| (float64),
//   |result - exact| <= A/(2Q) (step 2: one quantization per node's piece, scale <= max/Q)
//                     + A(1 + 1/(2Q))/(2Q) (step 3: requantization of the reduced piece)
//                     , times (1 + 1e-5) for the float32 scales,
//                     + eps_T (P + 2) (sum_r |x_r| + 2A) (float rounding of the exact sums).
template <class T>
void check(const std::vector<T>& got, const std::vector<T>& inputs_all, int64_t n, const World& w,
           const std::vector<char>& nonfinite_block, const std::string& what) {
  const double eps = std::numeric_limits<T>::epsilon();
  const int64_t nb = (n + kBlock - 1) / kBlock;
  int bad = 0;
  for (int64_t k = 0; k < nb && bad < 5; ++k) {
    const int64_t f = k * kBlock, e = std::min(n, f + kBlock);
    if (!nonfinite_block.empty() && nonfinite_block[k]) {
      for (int64_t i = f; i < e && bad < 5; ++i)
        if (!std::isnan(got[i])) {
          ++bad;
          ADD_FAILURE() << what << " element " << i << ": " << got[i] << ", expected NaN (non-finite input in its block)";
        }
      continue;
    }
    double A = 0;
    for (int m = 0; m < w.N; ++m) {
      double mx = 0;
      for (int64_t i = f; i < e; ++i) {
        double s = 0;
        for (int r = m * w.L; r < (m + 1) * w.L; ++r) s += inputs_all[r * n + i];
        mx = std::max(mx, std::fabs(s));
      }
      A += mx;
    }
    for (int64_t i = f; i < e && bad < 5; ++i) {
      double ref = 0, mag = 0;
      for (int r = 0; r < w.size; ++r) {
        ref += inputs_all[r * n + i];
        mag += std::fabs(static_cast<double>(inputs_all[r * n + i]));
      }
      const double q = A / (2.0 * w.Q) * (2.0 + 1.0 / (2.0 * w.Q)) * (1 + 1e-5);
      const double bound = q + eps * (w.size + 2) * (mag + 2 * A) + 1e-300;
      if (!(std::fabs(static_cast<double>(got[i]) - ref) <= bound)) {
        ++bad;
        ADD_FAILURE() << what << " element " << i << ": " << got[i] << " vs float64 " << ref << " (bound " << bound << ")";
      }
    }
  }
}

// One call: inputs from input(), optionally non-finite values planted at (rank, index, value).
struct Plant {
  int rank;
  int64_t index;
  double value;
};

template <class T>
void run_case(int64_t n, bool in_place, int seed, const std::vector<Plant>& plants = {}) {
  const World w = world();
  const std::string what = std::string(std::is_same_v<T, float> ? "float" : "double") + " count " +
                           std::to_string(n) + (in_place ? " in-place" : "") + " seed " + std::to_string(seed);
  std::vector<T> mine(n), got(n, T(-12345));
  for (int64_t i = 0; i < n; ++i) mine[i] = static_cast<T>(input(w.rank, i, seed));
  for (const Plant& p : plants)
    if (p.rank == w.rank && p.index < n) mine[p.index] = static_cast<T>(p.value);
  std::vector<T> all(static_cast<size_t>(n) * w.size);
  PMPI_Allgather(mine.data(), static_cast<int>(n), mpi_type<T>(), all.data(), static_cast<int>(n), mpi_type<T>(),
                 MPI_COMM_WORLD);
  if (in_place) {
    got = mine;
    ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, got.data(), static_cast<int>(n), mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD),
              MPI_SUCCESS);
  } else {
    ASSERT_EQ(MPI_Allreduce(mine.data(), got.data(), static_cast<int>(n), mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD),
              MPI_SUCCESS);
  }
  expect_same_everywhere(got.data(), got.size() * sizeof(T), w, what);
  std::vector<char> nonfinite;
  // exec::kQuantMinBytes; under HIER_TEST_FAIL the calls fall back to the MPI (exact).
  const bool quantized = n * static_cast<int64_t>(sizeof(T)) >= 64 * 1024 && !std::getenv("HIER_TEST_FAIL");
  if (!plants.empty()) {
    nonfinite.assign((n + kBlock - 1) / kBlock, 0);
    for (const Plant& p : plants)
      if (p.index < n) nonfinite[p.index / kBlock] = 1;
    if (!quantized) {  // exact: the planted elements only, IEEE semantics
      for (const Plant& p : plants) EXPECT_FALSE(std::isfinite(got[p.index])) << what << " element " << p.index;
      return;
    }
  }
  check<T>(got, all, n, w, nonfinite, what);
}

std::vector<int64_t> counts() {
  // 0, 1, primes, block multiples +- 1 (below and above the 64 KiB threshold for both types),
  // 1e5 + 3.
  // COLL_TEST_QUICK (8 ranks on 2 cores): fewer.
  if (std::getenv("COLL_TEST_QUICK")) return {0, 1, 509, 16383, 16385, 32769, 100003};
  return {0, 1, 7, 509, 8191, 16381, 16383, 16384, 16385, 32767, 32769, 40961, 100003};
}

TEST(QuantAllreduce, FloatAndDouble) {
  int seed = 1;
  for (int64_t n : counts())
    for (bool in_place : {false, true}) {
      run_case<float>(n, in_place, seed++);
      run_case<double>(n, in_place, seed++);
    }
  // 4 MiB of floats: the records of a shard pass 512 KiB (MPICH: padded allgathers at both levels).
  if (!std::getenv("COLL_TEST_QUICK")) run_case<float>((1 << 20) + 3, false, seed++);
}

TEST(QuantAllreduce, NonFinite) {
  const World w = world();
  const int last = w.size - 1;
  // A NaN on rank 1 and an Inf (and a -Inf in another block) on the last rank: NaN over those
  // blocks, everywhere; every other block within the bound.
  const std::vector<Plant> plants{{1 % w.size, 1234, std::numeric_limits<double>::quiet_NaN()},
                                  {last, 30000, std::numeric_limits<double>::infinity()},
                                  {0, 39999, -std::numeric_limits<double>::infinity()}};
  for (bool in_place : {false, true}) {
    run_case<float>(40000, in_place, 7, plants);
    run_case<double>(40000, in_place, 8, plants);
  }
}

// Under HIER_QUANT, what is not a float/double MPI_SUM stays exact: byte-equal to PMPI.
template <class T>
void expect_exact(MPI_Datatype type, MPI_Op op, int64_t n, bool in_place) {
  const World w = world();
  std::vector<T> mine(n), got(n), ref(n);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = mix(static_cast<uint64_t>(w.rank) << 32 ^ static_cast<uint64_t>(i));
    if constexpr (std::is_same_v<T, int>) mine[i] = static_cast<int>(h % 2001) - 1000;
    else if constexpr (std::is_same_v<T, float>) mine[i] = static_cast<float>(input(w.rank, i, 99));
    else {
      mine[i].v = static_cast<float>(h % 17);
      mine[i].i = static_cast<int>(h >> 40);
    }
  }
  ASSERT_EQ(PMPI_Allreduce(mine.data(), ref.data(), static_cast<int>(n), type, op, MPI_COMM_WORLD), MPI_SUCCESS);
  if (in_place) {
    got = mine;
    ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, got.data(), static_cast<int>(n), type, op, MPI_COMM_WORLD), MPI_SUCCESS);
  } else {
    ASSERT_EQ(MPI_Allreduce(mine.data(), got.data(), static_cast<int>(n), type, op, MPI_COMM_WORLD), MPI_SUCCESS);
  }
  EXPECT_EQ(std::memcmp(got.data(), ref.data(), n * sizeof(T)), 0) << "count " << n << (in_place ? " in-place" : "");
}

struct FloatInt {
  float v;
  int i;
};

TEST(QuantAllreduce, OthersStayExact) {
  for (int64_t n : {int64_t{1000}, int64_t{40961}})
    for (bool in_place : {false, true}) {
      expect_exact<int>(MPI_INT, MPI_SUM, n, in_place);
      expect_exact<float>(MPI_FLOAT, MPI_MAX, n, in_place);
      expect_exact<FloatInt>(MPI_FLOAT_INT, MPI_MINLOC, n, in_place);
    }
}

}  // namespace
