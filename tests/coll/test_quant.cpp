// Quantized hierarchical MPI_Allreduce (HIER_QUANT=int8|int4, exec/coll_quant.cpp) through the
// preloaded libhier, on MPI_COMM_WORLD under HIER_LEVELS=node:L (cartesian, L consecutive ranks
// per node). Checks: every rank holds the same bytes; every element is within the documented
// bound of a float64 reference computed from all ranks' inputs (gathered with PMPI); NaN and Inf
// inputs give NaN over their block, never a number; integer types, MPI_MAX and MPI_MINLOC stay
// byte-equal to PMPI. The report check (check_report.py --algo) proves the calls ran quantized.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "quant_world.hpp"

namespace {

// Random values with a mix of magnitudes: 1e-3 .. 1e3 changing every 300 values (so that blocks
// hold both small and large values), either sign, and some exact zeros.
double input(int rank, int64_t i, int seed) {
  const uint64_t h = mix((static_cast<uint64_t>(seed) << 48) ^ (static_cast<uint64_t>(rank) << 32) ^ static_cast<uint64_t>(i));
  if (h % 97 == 0) return 0.0;
  const int e = static_cast<int>(mix(static_cast<uint64_t>(i / 300) ^ (static_cast<uint64_t>(seed) << 40)) % 7) - 3;
  const double m = static_cast<double>(h >> 11) / static_cast<double>(uint64_t{1} << 53);  // [0, 1)
  return (h & 1 ? -1.0 : 1.0) * (0.5 + m) * std::pow(10.0, e);
}

// The stated bound (docs/collectives.md, "Quantized allreduce"), for element i of block k:
//   A = sum over nodes m of max over block k of |partial sum of node m| (float64),
//   |result - exact| <= A/(2Q) (step 2: one quantization per node's piece, scale <= max/Q)
//                     + A(1 + 1/(2Q))/(2Q) (step 3: requantization of the reduced piece)
//                     , times slack(Q) (quant/kernels.hpp: the float roundings of the scale),
//                     + eps_T (P + 2) (sum_r |x_r| + 2A) (float rounding of the exact sums).
template <class T>
void check(const std::vector<T>& got, const std::vector<T>& inputs_all, int64_t n, const World& w,
           const std::vector<char>& nonfinite_block, const std::string& what, bool quantized) {
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
      const double q = quantized ? A / (2.0 * w.Q) * (2.0 + 1.0 / (2.0 * w.Q)) * slack(w.Q) : 0.0;
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
  // The floor; under HIER_TEST_FAIL the calls fall back to the MPI (exact).
  const bool quantized = above_floor(n, w.size) && !std::getenv("HIER_TEST_FAIL") &&
                         !std::getenv("QUANT_TEST_EXACT");
  if (!plants.empty()) {
    nonfinite.assign((n + kBlock - 1) / kBlock, 0);
    for (const Plant& p : plants)
      if (p.index < n) nonfinite[p.index / kBlock] = 1;
    if (!quantized) {  // exact: the planted elements only, IEEE semantics
      for (const Plant& p : plants) EXPECT_FALSE(std::isfinite(got[p.index])) << what << " element " << p.index;
      return;
    }
  }
  check<T>(got, all, n, w, nonfinite, what, quantized);
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

// ---- Reduce_scatter(_block), Allgather (qgZ / qwZ), error feedback ---------------------------

namespace {

bool quantizing() { return !std::getenv("HIER_TEST_FAIL") && !std::getenv("QUANT_TEST_EXACT"); }
bool feedback_on() {
  const char* f = std::getenv("HIER_QUANT_FEEDBACK");
  return f && std::string(f) != "off" && std::string(f) != "0";
}

// Per-element bound of a value quantized once per node's partial sum (reduce-scatter, qgZ):
// A/(2Q) with A = sum over nodes of the largest |partial sum| of that node in the element's
// block (blocks start at the piece's first value), float32 scales slack(Q), plus the float
// rounding of the sums. Exact paths (QUANT_TEST_EXACT, failures): the rounding term alone.
template <class T>
void check_rs_piece(const T* got, const std::vector<T>& all, int64_t total, int64_t first, int64_t n, const World& w,
                    const std::string& what, double* max_ratio = nullptr, bool expect = true) {
  const double eps = std::numeric_limits<T>::epsilon();
  const bool quant = quantizing() && above_floor(total, w.size);
  int bad = 0;
  for (int64_t b0 = 0; b0 < n && bad < 5; b0 += kBlock) {
    const int64_t b1 = std::min(n, b0 + kBlock);
    const double A = node_absmax_sum(all, total, first, b0, b1, w);
    for (int64_t i = b0; i < b1 && bad < 5; ++i) {
      double ref = 0, mag = 0;
      for (int r = 0; r < w.size; ++r) {
        ref += all[r * total + first + i];
        mag += std::fabs(static_cast<double>(all[r * total + first + i]));
      }
      const double q = quant ? A / (2.0 * w.Q) * slack(w.Q) : 0.0;
      const double bound = q + eps * (w.size + 2) * (mag + A) + 1e-300;
      const double err = std::fabs(static_cast<double>(got[i]) - ref);
      if (max_ratio) *max_ratio = std::max(*max_ratio, err / bound);
      if (expect && !(err <= bound)) {
        ++bad;
        ADD_FAILURE() << what << " element " << first + i << ": " << got[i] << " vs float64 " << ref << " (bound " << bound << ")";
      }
    }
  }
}

// counts[r] values for rank r; block: all equal.
template <class T>
void rs_case(const std::vector<int64_t>& counts, bool block, bool in_place, int seed) {
  const World w = world();
  int64_t total = 0, first = 0;
  for (int r = 0; r < w.size; ++r) {
    if (r == w.rank) first = total;
    total += counts[r];
  }
  const std::string what = std::string(block ? "reduce_scatter_block " : "reduce_scatter ") +
                           (std::is_same_v<T, float> ? "float" : "double") + " total " + std::to_string(total) +
                           (in_place ? " in-place" : "") + " seed " + std::to_string(seed);
  std::vector<T> mine(total), all(static_cast<size_t>(total) * w.size);
  for (int64_t i = 0; i < total; ++i) mine[i] = static_cast<T>(input(w.rank, i, seed));
  if (total)
    PMPI_Allgather(mine.data(), static_cast<int>(total), mpi_type<T>(), all.data(), static_cast<int>(total),
                   mpi_type<T>(), MPI_COMM_WORLD);
  std::vector<int> ic(counts.begin(), counts.end());
  auto call = [&](std::vector<T>& out) {
    if (in_place) {
      out = mine;
      out.resize(std::max<int64_t>(total, 1));
      return block ? MPI_Reduce_scatter_block(MPI_IN_PLACE, out.data(), ic[0], mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD)
                   : MPI_Reduce_scatter(MPI_IN_PLACE, out.data(), ic.data(), mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD);
    }
    out.assign(std::max<int64_t>(counts[w.rank], 1), T(-12345));
    return block ? MPI_Reduce_scatter_block(mine.data(), out.data(), ic[0], mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD)
                 : MPI_Reduce_scatter(mine.data(), out.data(), ic.data(), mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD);
  };
  std::vector<T> got, again;
  ASSERT_EQ(call(got), MPI_SUCCESS) << what;
  check_rs_piece<T>(got.data(), all, total, first, counts[w.rank], w, what);
  // The same call again gives the same bits (one fixed order, no state: feedback is off here).
  if (!feedback_on()) {
    ASSERT_EQ(call(again), MPI_SUCCESS) << what;
    EXPECT_EQ(std::memcmp(got.data(), again.data(), counts[w.rank] * sizeof(T)), 0) << what << ": not repeatable";
  }
}

std::vector<int64_t> rs_counts(int64_t base, int size, bool uneven) {
  std::vector<int64_t> c(size, base);
  if (uneven)
    // Zeros, unaligned, decreasing: no rank's count exceeds its displacement. MPICH 4.0.2's own
    // in-place MPI_Reduce_scatter (the exact fallback) memcpy's a rank's piece to the start of
    // recvbuf and asserts on overlapping ranges otherwise (typerep_yaksa_pack.c:286).
    for (int r = 0; r < size; ++r) c[r] = r % 3 == 1 ? 0 : base + 37 * (size - 1 - r);
  return c;
}

TEST(QuantReduceScatter, BlockAndVector) {
  const World w = world();
  int seed = 100;
  std::vector<int64_t> bases = {1, 7, 509, 4099, 16411};
  if (!std::getenv("COLL_TEST_QUICK")) bases.push_back(65537);
  for (int64_t b : bases)
    for (bool in_place : {false, true}) {
      rs_case<float>(rs_counts(b, w.size, false), true, in_place, seed++);
      rs_case<double>(rs_counts(b, w.size, false), true, in_place, seed++);
      rs_case<float>(rs_counts(b, w.size, true), false, in_place, seed++);
    }
}

// Allgather: every rank's block, quantized once at its source: within s/2 of the input, where s
// = the largest |value| of its block / Q; the same bits on every rank.
template <class T>
void ag_case(int64_t c, bool in_place, bool derived_send, int seed) {
  const World w = world();
  const std::string what = std::string("allgather ") + (std::is_same_v<T, float> ? "float" : "double") + " count " +
                           std::to_string(c) + (in_place ? " in-place" : "") + (derived_send ? " derived" : "") +
                           " seed " + std::to_string(seed);
  std::vector<T> mine(c), got(static_cast<size_t>(c) * w.size, T(-12345));
  for (int64_t i = 0; i < c; ++i) mine[i] = static_cast<T>(input(w.rank, i, seed));
  int rc;
  if (in_place) {
    std::copy(mine.begin(), mine.end(), got.begin() + w.rank * c);
    rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got.data(), static_cast<int>(c), mpi_type<T>(), MPI_COMM_WORLD);
  } else if (derived_send) {
    MPI_Datatype ct;
    MPI_Type_contiguous(static_cast<int>(c), mpi_type<T>(), &ct);
    MPI_Type_commit(&ct);
    rc = MPI_Allgather(mine.data(), 1, ct, got.data(), static_cast<int>(c), mpi_type<T>(), MPI_COMM_WORLD);
    MPI_Type_free(&ct);
  } else {
    rc = MPI_Allgather(mine.data(), static_cast<int>(c), mpi_type<T>(), got.data(), static_cast<int>(c), mpi_type<T>(),
                       MPI_COMM_WORLD);
  }
  ASSERT_EQ(rc, MPI_SUCCESS) << what;
  expect_same_everywhere(got.data(), got.size() * sizeof(T), w, what);
  const bool quant = quantizing() && above_floor(c * w.size, w.size);
  int bad = 0;
  for (int r = 0; r < w.size && bad < 5; ++r)
    for (int64_t b0 = 0; b0 < c && bad < 5; b0 += kBlock) {
      const int64_t b1 = std::min(c, b0 + kBlock);
      double mx = 0;
      for (int64_t i = b0; i < b1; ++i) mx = std::max(mx, std::fabs(static_cast<double>(static_cast<T>(input(r, i, seed)))));
      const double bound = quant ? mx / (2.0 * w.Q) * slack(w.Q) : 0.0;
      for (int64_t i = b0; i < b1 && bad < 5; ++i) {
        const double x = static_cast<T>(input(r, i, seed));
        if (!(std::fabs(static_cast<double>(got[r * c + i]) - x) <= bound)) {
          ++bad;
          ADD_FAILURE() << what << " rank " << r << " element " << i << ": " << got[r * c + i] << " vs " << x
                        << " (bound " << bound << ")";
        }
      }
    }
}

TEST(QuantAllgather, FloatAndDouble) {
  int seed = 200;
  std::vector<int64_t> cs = {1, 7, 509, 4099, 16411};
  if (!std::getenv("COLL_TEST_QUICK")) cs.push_back(65537);
  for (int64_t c : cs)
    for (bool in_place : {false, true}) {
      ag_case<float>(c, in_place, false, seed++);
      ag_case<double>(c, in_place, false, seed++);
    }
  ag_case<float>(4099, false, true, seed++);
}

// Under HIER_QUANT, what is not float/double (MPI_SUM for the reductions) stays byte-equal to PMPI.
TEST(QuantReduceScatter, OthersStayExact) {
  const World w = world();
  const int64_t c = 40961;
  std::vector<int> mine(c * w.size), got(c), ref(c);
  std::vector<float> fm(c * w.size), fg(c), fr(c);
  for (int64_t i = 0; i < c * w.size; ++i) {
    mine[i] = static_cast<int>(mix(static_cast<uint64_t>(w.rank) << 32 ^ static_cast<uint64_t>(i)) % 2001) - 1000;
    fm[i] = static_cast<float>(input(w.rank, i, 5));
  }
  ASSERT_EQ(PMPI_Reduce_scatter_block(mine.data(), ref.data(), static_cast<int>(c), MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(MPI_Reduce_scatter_block(mine.data(), got.data(), static_cast<int>(c), MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(std::memcmp(got.data(), ref.data(), c * sizeof(int)), 0) << "int sum";
  ASSERT_EQ(PMPI_Reduce_scatter_block(fm.data(), fr.data(), static_cast<int>(c), MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(MPI_Reduce_scatter_block(fm.data(), fg.data(), static_cast<int>(c), MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(std::memcmp(fg.data(), fr.data(), c * sizeof(float)), 0) << "float max";
  // Allgather of ints: a copy, byte-equal.
  std::vector<int> ag(c * w.size), agr(c * w.size);
  ASSERT_EQ(MPI_Allgather(mine.data(), static_cast<int>(c), MPI_INT, ag.data(), static_cast<int>(c), MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Allgather(mine.data(), static_cast<int>(c), MPI_INT, agr.data(), static_cast<int>(c), MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(std::memcmp(ag.data(), agr.data(), ag.size() * sizeof(int)), 0) << "int allgather";
}

// The floor (model/cost_quant.hpp): floats holding small integers sum exactly in any order, so an
// exact call is byte-equal to PMPI whatever its schedule, while quantizing them (scale ~ 2000/Q
// for node sums up to 2000) cannot be. A call one value short of B values per rank stays exact;
// four times the floor is quantized (the report check of these variants shows hier_int8/int4).
TEST(QuantFloor, SmallStaysExactLargeIsQuantized) {
  if (!quantizing() || feedback_on()) GTEST_SKIP() << "exact or feedback variant";
  const World w = world();
  for (int64_t n : {kBlock * w.size - 1, kBlock * w.size * 4}) {
    const bool small = n < kBlock * w.size;
    std::vector<float> mine(n), got(n), ref(n);
    for (int64_t i = 0; i < n; ++i)
      mine[i] = static_cast<float>(static_cast<int>(mix(static_cast<uint64_t>(w.rank) << 32 ^ static_cast<uint64_t>(i)) % 2001) - 1000);
    ASSERT_EQ(MPI_Allreduce(mine.data(), got.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(PMPI_Allreduce(mine.data(), ref.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    expect_same_everywhere(got.data(), got.size() * sizeof(float), w, "floor allreduce");
    const bool equal = std::memcmp(got.data(), ref.data(), n * sizeof(float)) == 0;
    EXPECT_EQ(equal, small) << "allreduce of " << n << " integer-valued floats: " << (equal ? "exact" : "quantized");
    // Reduce_scatter_block of the same: n/P per rank (the small call rounded down to whole pieces).
    const int64_t c = n / w.size;
    std::vector<float> rs(std::max<int64_t>(c, 1)), rsr(std::max<int64_t>(c, 1));
    ASSERT_EQ(MPI_Reduce_scatter_block(mine.data(), rs.data(), static_cast<int>(c), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(PMPI_Reduce_scatter_block(mine.data(), rsr.data(), static_cast<int>(c), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    // Every rank's verdict: some rank's piece may happen to round exactly, not all of them.
    int eq = std::memcmp(rs.data(), rsr.data(), c * sizeof(float)) == 0, all_eq = 0;
    PMPI_Allreduce(&eq, &all_eq, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    EXPECT_EQ(all_eq != 0, small) << "reduce_scatter_block of " << c << " per rank";
  }
}

// Error feedback: the same gradient summed K times on one buffer. With HIER_QUANT_FEEDBACK the
// errors telescope (sum of K results = K * exact - the last residuals), so the accumulated error
// stays within a few single-call bounds; without it the same error repeats K times and the
// accumulated error passes that tolerance (checked too, so the test shows what feedback buys).
TEST(QuantFeedback, AccumulatedSumConverges) {
  if (!quantizing()) GTEST_SKIP() << "exact run";
  const World w = world();
  constexpr int K = 24;
  const double tol_calls = 3.0;  // tolerance: 3 single-call bounds
  // Allreduce.
  {
    const int64_t n = 20000;
    std::vector<float> x(n), out(n);
    std::vector<double> acc(n, 0.0);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(input(w.rank, i, 300));
    std::vector<float> all(static_cast<size_t>(n) * w.size);
    PMPI_Allgather(x.data(), static_cast<int>(n), MPI_FLOAT, all.data(), static_cast<int>(n), MPI_FLOAT, MPI_COMM_WORLD);
    for (int k = 0; k < K; ++k) {
      ASSERT_EQ(MPI_Allreduce(x.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
      for (int64_t i = 0; i < n; ++i) acc[i] += out[i];
    }
    // Per element: |acc - K*ref| against the single-call allreduce bound (two quantizations).
    double worst = 0;
    for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
      const int64_t b1 = std::min(n, b0 + kBlock);
      const double A = node_absmax_sum(all, n, 0, b0, b1, w);
      const double bound1 = A / (2.0 * w.Q) * (2.0 + 1.0 / (2.0 * w.Q)) * slack(w.Q) + 1e-6 * (w.size + 2) * 3 * A;
      for (int64_t i = b0; i < b1; ++i) {
        double ref = 0;
        for (int r = 0; r < w.size; ++r) ref += all[r * n + i];
        worst = std::max(worst, std::fabs(acc[i] - K * ref) / (tol_calls * bound1));
      }
    }
    if (feedback_on()) EXPECT_LE(worst, 1.0) << "allreduce: accumulated error over " << K << " calls, in tolerances";
    else EXPECT_GT(worst, 1.0) << "allreduce without feedback: the accumulated error should pass the tolerance";
  }
  // Reduce_scatter_block.
  {
    const int64_t c = 8209;
    const int64_t total = c * w.size;
    std::vector<float> x(total), out(c);
    std::vector<double> acc(c, 0.0);
    for (int64_t i = 0; i < total; ++i) x[i] = static_cast<float>(input(w.rank, i, 301));
    std::vector<float> all(static_cast<size_t>(total) * w.size);
    PMPI_Allgather(x.data(), static_cast<int>(total), MPI_FLOAT, all.data(), static_cast<int>(total), MPI_FLOAT, MPI_COMM_WORLD);
    for (int k = 0; k < K; ++k) {
      ASSERT_EQ(MPI_Reduce_scatter_block(x.data(), out.data(), static_cast<int>(c), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
      for (int64_t i = 0; i < c; ++i) acc[i] += out[i];
    }
    // With feedback, ref + (acc - K*ref)/tol_calls must pass the single-call bound.
    double worst = 0;
    std::vector<float> scaled(c);
    for (int64_t i = 0; i < c; ++i) {
      double ref = 0;
      for (int r = 0; r < w.size; ++r) ref += all[r * total + w.rank * c + i];
      scaled[i] = static_cast<float>(ref + (acc[i] - K * ref) / tol_calls);
    }
    check_rs_piece<float>(scaled.data(), all, total, w.rank * c, c, w, "rs feedback", &worst, feedback_on());
    if (!feedback_on()) {
      EXPECT_GT(worst, 1.0) << "reduce_scatter_block without feedback: the accumulated error should pass the tolerance";
    }
  }
  // Allgather.
  {
    const int64_t c = 8209;
    std::vector<float> x(c), out(c * w.size);
    std::vector<double> acc(c * w.size, 0.0);
    for (int64_t i = 0; i < c; ++i) x[i] = static_cast<float>(input(w.rank, i, 302));
    for (int k = 0; k < K; ++k) {
      ASSERT_EQ(MPI_Allgather(x.data(), static_cast<int>(c), MPI_FLOAT, out.data(), static_cast<int>(c), MPI_FLOAT, MPI_COMM_WORLD), MPI_SUCCESS);
      for (int64_t i = 0; i < c * w.size; ++i) acc[i] += out[i];
    }
    expect_same_everywhere(acc.data(), acc.size() * sizeof(double), w, "allgather feedback");
    double worst = 0;
    for (int r = 0; r < w.size; ++r)
      for (int64_t b0 = 0; b0 < c; b0 += kBlock) {
        const int64_t b1 = std::min(c, b0 + kBlock);
        double mx = 0;
        for (int64_t i = b0; i < b1; ++i) mx = std::max(mx, std::fabs(static_cast<double>(static_cast<float>(input(r, i, 302)))));
        const double bound1 = mx / (2.0 * w.Q) * slack(w.Q) * (1 + 1.0 / w.Q);
        for (int64_t i = b0; i < b1; ++i) {
          const double xv = static_cast<float>(input(r, i, 302));
          worst = std::max(worst, std::fabs(acc[r * c + i] - K * xv) / (tol_calls * bound1));
        }
      }
    if (feedback_on()) EXPECT_LE(worst, 1.0) << "allgather: accumulated error over " << K << " calls, in tolerances";
    else EXPECT_GT(worst, 1.0) << "allgather without feedback: the accumulated error should pass the tolerance";
  }
}

}  // namespace

// ---- Types of the same signature in different layouts on different ranks --------------------
// The standard lets the ranks of an allgather pass different receive (and send) types of one
// type signature. Every rank must take the same schedule (quantized or exact) whatever its own
// layout: before the decision read the signature only, such mixes split the ranks and hung
// (the test's TIMEOUT turns that into a failure). Results: within the bound of the PMPI result,
// the same values on every rank, and the gaps of a strided layout untouched.

// A layout of values of T: an MPI type and where value i (of a run of count * per values) sits.
struct TypeLayout {
  const char* name;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int per = 1;               // values per element of `type`
  int64_t extent_values = 1;  // element extent, in values
  std::vector<int64_t> at;   // value k of an element at this value offset in it
  bool owned = false;
  int64_t offset(int64_t i) const { return (i / per) * extent_values + at[static_cast<size_t>(i % per)]; }
  int64_t span(int64_t n) const {  // values a buffer of n values (whole elements) spans
    return n == 0 ? 0 : (n / per - 1) * extent_values + *std::max_element(at.begin(), at.end()) + 1;
  }
  ~TypeLayout() {
    if (owned) MPI_Type_free(&type);
  }
};

constexpr int kLayouts = 6;

template <class T>
std::unique_ptr<TypeLayout> make_layout(int which) {
  const MPI_Datatype b = mpi_type<T>();
  const MPI_Aint sz = sizeof(T);
  auto l = std::make_unique<TypeLayout>();
  l->owned = true;
  switch (which % kLayouts) {
    case 0:  // the predefined type
      l->name = "plain";
      l->type = b;
      l->owned = false;
      l->at = {0};
      break;
    case 1:  // a contiguous type of 2 values (count halved)
      l->name = "contiguous2";
      MPI_Type_contiguous(2, b, &l->type);
      l->per = 2;
      l->extent_values = 2;
      l->at = {0, 1};
      break;
    case 2: {  // one value per 2 slots: a gap after every value
      l->name = "resized-gap";
      MPI_Type_create_resized(b, 0, 2 * sz, &l->type);
      l->extent_values = 2;
      l->at = {0};
      break;
    }
    case 3: {  // vector of 2 values at stride 2: [v . v], extent 3
      l->name = "vector";
      MPI_Type_vector(2, 1, 2, b, &l->type);
      l->per = 2;
      l->extent_values = 3;
      l->at = {0, 2};
      break;
    }
    case 4: {  // struct {v, int x 0, v} with its second value first in memory, resized to 4
      l->name = "struct";
      int bl[3] = {1, 0, 1};
      MPI_Aint disp[3] = {3 * sz, 0, sz};
      MPI_Datatype ts[3] = {b, MPI_INT, b};
      MPI_Datatype s;
      MPI_Type_create_struct(3, bl, disp, ts, &s);
      MPI_Type_create_resized(s, 0, 4 * sz, &l->type);
      MPI_Type_free(&s);
      l->per = 2;
      l->extent_values = 4;
      l->at = {3, 1};
      break;
    }
    default:  // a duplicate of the predefined type
      l->name = "dup";
      MPI_Type_dup(b, &l->type);
      l->at = {0};
      break;
  }
  if (l->owned) MPI_Type_commit(&l->type);
  return l;
}

template <class T>
void ag_mixed_case(int64_t c, bool in_place, int variant, int seed) {
  const World w = world();
  const auto rl = make_layout<T>(w.rank + variant);
  const auto sl = make_layout<T>(w.rank + variant + 2);
  const std::string what = std::string("mixed allgather ") + (std::is_same_v<T, float> ? "float" : "double") +
                           " count " + std::to_string(c) + (in_place ? " in-place" : "") + " recv " + rl->name +
                           " send " + sl->name + " seed " + std::to_string(seed);
  std::vector<T> mine(c);
  for (int64_t i = 0; i < c; ++i) mine[i] = static_cast<T>(input(w.rank, i, seed));
  // The PMPI result, dense.
  std::vector<T> ref(static_cast<size_t>(c) * w.size);
  PMPI_Allgather(mine.data(), static_cast<int>(c), mpi_type<T>(), ref.data(), static_cast<int>(c), mpi_type<T>(),
                 MPI_COMM_WORLD);
  const int64_t n = c * w.size;
  const T sentinel = T(-12345.5);
  std::vector<T> recv(static_cast<size_t>(rl->span(n)), sentinel);
  std::vector<T> send(static_cast<size_t>(sl->span(c)), sentinel);
  for (int64_t i = 0; i < c; ++i) send[sl->offset(i)] = mine[i];
  const int rcount = static_cast<int>(c / rl->per), scount = static_cast<int>(c / sl->per);
  int rc;
  if (in_place) {
    for (int64_t i = 0; i < c; ++i) recv[rl->offset(w.rank * c + i)] = mine[i];
    rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv.data(), rcount, rl->type, MPI_COMM_WORLD);
  } else {
    rc = MPI_Allgather(send.data(), scount, sl->type, recv.data(), rcount, rl->type, MPI_COMM_WORLD);
  }
  ASSERT_EQ(rc, MPI_SUCCESS) << what;
  // The values, dense, and the gaps untouched.
  std::vector<T> got(static_cast<size_t>(n));
  std::vector<char> is_value(recv.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    got[i] = recv[rl->offset(i)];
    is_value[rl->offset(i)] = 1;
  }
  for (size_t k = 0; k < recv.size(); ++k)
    if (!is_value[k] && std::memcmp(&recv[k], &sentinel, sizeof(T)) != 0) {
      ADD_FAILURE() << what << ": the gap at value slot " << k << " was written";
      break;
    }
  expect_same_everywhere(got.data(), got.size() * sizeof(T), w, what);
  const bool quant = quantizing() && above_floor(n, w.size);
  int bad = 0;
  double worst = 0;
  for (int r = 0; r < w.size && bad < 5; ++r)
    for (int64_t b0 = 0; b0 < c && bad < 5; b0 += kBlock) {
      const int64_t b1 = std::min(c, b0 + kBlock);
      double mx = 0;
      for (int64_t i = b0; i < b1; ++i) mx = std::max(mx, std::fabs(static_cast<double>(ref[r * c + i])));
      const double bound = quant ? mx / (2.0 * w.Q) * slack(w.Q) : 0.0;
      for (int64_t i = b0; i < b1 && bad < 5; ++i) {
        const double err = std::fabs(static_cast<double>(got[r * c + i]) - static_cast<double>(ref[r * c + i]));
        worst = std::max(worst, err);
        if (!(err <= bound)) {
          ++bad;
          ADD_FAILURE() << what << " rank " << r << " element " << i << ": " << got[r * c + i] << " vs PMPI "
                        << ref[r * c + i] << " (bound " << bound << ")";
        }
      }
    }
  // Quantized on every rank: some value moved (random data; no rank took the exact schedule).
  if (quant) {
    EXPECT_GT(worst, 0.0) << what << ": expected the quantized schedule, got exact values";
  }
}

TEST(QuantMixedTypes, AllgatherReceiveLayouts) {
  int seed = 700;
  // Even counts (the 2-value types halve them), below and above the floor.
  const std::vector<int64_t> cs = std::getenv("COLL_TEST_QUICK") ? std::vector<int64_t>{2, 1030, 4098}
                                                                  : std::vector<int64_t>{2, 508, 1030, 4098, 16412};
  for (int64_t c : cs)
    for (int variant = 0; variant < kLayouts; variant += std::getenv("COLL_TEST_QUICK") ? 3 : 1)
      for (bool in_place : {false, true}) {
        ag_mixed_case<float>(c, in_place, variant, seed++);
        if (variant % 2 == 0) ag_mixed_case<double>(c, in_place, variant, seed++);
      }
}
