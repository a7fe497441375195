// The reduction kernels (device/reduce.hpp), run by the host backend, against the MPI's own
// MPI_Reduce_local: every predefined op on every element type of the table, byte for byte (but
// for the NaN payloads IEEE leaves open: same() below), on
// counts 0, 1, primes and large, with values that test the corners (integer overflow, NaN, -0,
// infinities, denormals for floats; only 0/1 for bool). Pairs the MPI rejects must be refused by
// the kernels too, and pairs the kernels refuse must be rejected by the MPI.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "device/backend.hpp"
#include "device/reduce_mpi.hpp"

namespace {

using hier::device::ElemType;
using hier::device::ReduceOp;

struct TypeRow {
  const char* name;
  MPI_Datatype mpi;
  ElemType e;
  size_t size;
  bool is_float, is_bool, is_unsigned;
};

std::vector<TypeRow> types() {
  return {
#define HIER_REDUCE_TYPE(e, type, kind, mpi) \
  {#e, mpi, ElemType::e, sizeof(type), std::is_floating_point_v<type>, std::is_same_v<type, bool>, \
   std::is_unsigned_v<type> && !std::is_same_v<type, bool>},
#include "device/reduce_types.def"
  };
}

const MPI_Op kOps[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
const char* const kOpNames[] = {"sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor"};

template <class F>
void fill_float(std::vector<char>& b, size_t n, std::mt19937_64& g) {
  const F special[] = {std::numeric_limits<F>::quiet_NaN(), -std::numeric_limits<F>::quiet_NaN(), F(0), -F(0),
                       std::numeric_limits<F>::infinity(), -std::numeric_limits<F>::infinity(),
                       std::numeric_limits<F>::denorm_min(), std::numeric_limits<F>::max(), F(1), F(-1)};
  std::uniform_real_distribution<F> u(F(-1000), F(1000));
  for (size_t i = 0; i < n; ++i) {
    const F v = (g() % 4 == 0) ? special[g() % std::size(special)] : u(g);
    std::memcpy(b.data() + i * sizeof(F), &v, sizeof(F));
  }
}

// Open MPI 4.1.4's AVX op component (Debian's build, on a CPU with AVX-512BW) sums 8- and 16-bit
// integers with saturating instructions from 16 elements on, and with wrapping C arithmetic
// below that: MPI_INT8_T 100 + 100 gives -56 for 8 elements and 127 for 16 (measured
// here). MPI defines the sum as C's, which wraps on every MPI's scalar path, and so do the
// kernels; for those types the sums are compared on values that cannot overflow.
bool small_values(const TypeRow& t, MPI_Op op) { return op == MPI_SUM && !t.is_float && t.size <= 2; }

std::vector<char> values(const TypeRow& t, size_t n, std::mt19937_64& g, bool small = false) {
  std::vector<char> b(n * t.size + 1);
  if (t.is_bool) {
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<char>(g() & 1);
  } else if (t.is_float && t.size == 4) {
    fill_float<float>(b, n, g);
  } else if (t.is_float) {
    fill_float<double>(b, n, g);
  } else if (small) {
    for (size_t i = 0; i < n * t.size; i += t.size) {
      const uint64_t v = g() % 64;  // two of them cannot overflow int8_t
      std::memcpy(b.data() + i, &v, t.size);
    }
  } else {
    // Integers: random bits (overflow in sum and product), often small values and zeros (the
    // logical ops), sometimes the extremes.
    for (size_t i = 0; i < n * t.size; i += t.size) {
      const uint64_t r = g();
      const uint64_t v = r % 3 == 0 ? g() : r % 3 == 1 ? (g() % 4) : (g() & 1 ? ~0ull : 1ull << (8 * t.size - 1));
      std::memcpy(b.data() + i, &v, t.size);
    }
  }
  return b;
}

// Byte for byte, except where the MPI's own loops disagree with each other (measured on
// Debian's Open MPI 4.1, whose AVX loop and scalar tail order the operands differently):
// - a sum or product of two NaNs may be either NaN (IEEE 754 leaves the payload open);
// - min / max of operands that do not compare (a NaN, or 0 against -0) may be either operand
//   (device/reduce.hpp says which one the kernels return).
template <class F>
bool same_value(const char* a, const char* b, const char* in, const char* io, bool arith) {
  F x, y, p, q;
  std::memcpy(&x, a, sizeof(F));
  std::memcpy(&y, b, sizeof(F));
  std::memcpy(&p, in, sizeof(F));
  std::memcpy(&q, io, sizeof(F));
  if (std::memcmp(a, b, sizeof(F)) == 0) return true;
  if (arith) return std::isnan(x) && std::isnan(y);
  const bool tie = !(p < q) && !(q < p);
  return tie && (std::memcmp(b, in, sizeof(F)) == 0 || std::memcmp(b, io, sizeof(F)) == 0);
}

::testing::AssertionResult same(const TypeRow& t, MPI_Op op, const std::vector<char>& in, const std::vector<char>& io0,
                                const std::vector<char>& ref, const std::vector<char>& got, size_t n) {
  const bool arith = op == MPI_SUM || op == MPI_PROD;
  for (size_t i = 0; i < n; ++i) {
    const size_t k = i * t.size;
    const char* a = ref.data() + k;
    const char* b = got.data() + k;
    const bool ok = !t.is_float ? std::memcmp(a, b, t.size) == 0
                    : t.size == 4 ? same_value<float>(a, b, in.data() + k, io0.data() + k, arith)
                                  : same_value<double>(a, b, in.data() + k, io0.data() + k, arith);
    if (!ok) return ::testing::AssertionFailure() << "element " << i << " differs";
  }
  return ::testing::AssertionSuccess();
}

// Debian's MPICH 4.0.2 compares unsigned integers as signed in MPI_MIN and MPI_MAX (measured
// here: MPI_MIN of 3000000000u and 5u on MPI_UINT32_T or MPI_UNSIGNED gives 3000000000u, in
// MPI_Reduce_local and MPI_Allreduce alike; Open MPI gives 5). There the reference is C's own
// comparison of the unsigned values, computed here.
bool mpi_compares_unsigned_as_signed(const TypeRow& t, MPI_Op op) {
#if defined(OMPI_MAJOR_VERSION)
  return false;
#else
  return t.is_unsigned && (op == MPI_MIN || op == MPI_MAX);
#endif
}

template <class U>
void unsigned_minmax(const char* in, char* io, size_t n, bool min) {
  for (size_t i = 0; i < n; ++i) {
    U a, b;
    std::memcpy(&a, in + i * sizeof(U), sizeof(U));
    std::memcpy(&b, io + i * sizeof(U), sizeof(U));
    const U r = min ? (b < a ? b : a) : (b > a ? b : a);
    std::memcpy(io + i * sizeof(U), &r, sizeof(U));
  }
}

void c_reference(const TypeRow& t, MPI_Op op, const std::vector<char>& in, std::vector<char>& io, size_t n) {
  const bool min = op == MPI_MIN;
  switch (t.size) {
    case 1: unsigned_minmax<uint8_t>(in.data(), io.data(), n, min); break;
    case 2: unsigned_minmax<uint16_t>(in.data(), io.data(), n, min); break;
    case 4: unsigned_minmax<uint32_t>(in.data(), io.data(), n, min); break;
    default: unsigned_minmax<uint64_t>(in.data(), io.data(), n, min); break;
  }
}

TEST(DeviceReduce, MatchesReduceLocal) {
  const hier::device::Backend& host = hier::device::host();
  ASSERT_NE(host.reduce, nullptr);
  std::mt19937_64 g(20261127);
  int compared = 0, refused = 0;
  for (const TypeRow& t : types()) {
    ASSERT_EQ(hier::device::elem_type_of(t.mpi), t.e) << t.name;
    for (size_t o = 0; o < std::size(kOps); ++o) {
      const ReduceOp op = *hier::device::reduce_op_of(kOps[o]);
      for (size_t n : {0, 1, 2, 7, 31, 1009, 65537}) {
        const bool small = small_values(t, kOps[o]);
        const std::vector<char> in = values(t, n, g, small), io0 = values(t, n, g, small);
        std::vector<char> ref = io0, got = io0;
        const bool ok = host.reduce(op, t.e, in.data(), got.data(), static_cast<int64_t>(n));
        // MPI defines sum, prod, min, max on floats, the logical ops on bool, all on integers.
        // Other pairs are not given to the MPI (MPICH 4.0.2 aborts on MPI_LAND of doubles);
        // the kernels must refuse them.
        const bool defined = t.is_bool ? o >= 4 && o <= 6 : t.is_float ? o <= 3 : true;
        if (!defined) {
          EXPECT_FALSE(ok) << t.name << " " << kOpNames[o] << ": MPI does not define it";
          ++refused;
          break;
        }
        ASSERT_EQ(MPI_SUCCESS, PMPI_Reduce_local(in.data(), ref.data(), static_cast<int>(n), t.mpi, kOps[o]))
            << t.name << " " << kOpNames[o];
        ASSERT_TRUE(ok) << t.name << " " << kOpNames[o] << ": the MPI reduces it, the kernels refuse";
        if (mpi_compares_unsigned_as_signed(t, kOps[o])) {
          ref = io0;
          c_reference(t, kOps[o], in, ref, n);
        }
        ASSERT_TRUE(same(t, kOps[o], in, io0, ref, got, n)) << t.name << " " << kOpNames[o] << " count " << n;
        ++compared;
      }
    }
  }
  // Every (op, type) pair MPI defines was compared, on 7 counts each: 8 integer types x 10 ops,
  // 2 float types x 4, bool x 3; the other 19 pairs were refused.
  EXPECT_EQ(compared, (8 * 10 + 2 * 4 + 3) * 7);
  EXPECT_EQ(refused, 2 * 6 + 7);
}

TEST(DeviceReduce, NoKernelForOtherHandles) {
  EXPECT_FALSE(hier::device::elem_type_of(MPI_DATATYPE_NULL));
  EXPECT_FALSE(hier::device::elem_type_of(MPI_FLOAT_INT));
  EXPECT_FALSE(hier::device::reduce_op_of(MPI_MINLOC));
  EXPECT_FALSE(hier::device::reduce_op_of(MPI_REPLACE));
  EXPECT_EQ(hier::device::elem_type_of(MPI_INT), ElemType::I32);
  EXPECT_EQ(hier::device::elem_type_of(MPI_UNSIGNED_LONG), ElemType::U64);
}

}  // namespace
