// Element-wise reductions of MPI's predefined operations over its basic types, as HIER_HD
// bodies: the host backend runs them (device/reduce_host.cpp, tested against the MPI's own
// MPI_Reduce_local bit for bit), and the GPU modules launch the same bodies (gpu/module.cu).
// Semantics are MPI_Reduce_local's: inout[i] = in[i] op inout[i].
// - Integers wrap on overflow (computed in the unsigned type: defined behaviour, and the bits
//   both MPIs produce).
// - MPI_MIN / MPI_MAX: where neither operand is smaller (a NaN, or 0 against -0) the result is
//   `in`, as MPICH 4.0 gives and Open MPI 4.1's scalar loop; its AVX loop keeps `inout` instead,
//   so one Open MPI call mixes both (measured here: tests/device/reduce_test.cpp). MPI does not
//   say which, so these kernels keep one rule everywhere.
// - The logical ops give 0 or 1, of the element type.
#pragma once

#include <cstdint>
#include <type_traits>

#include "device/hd.hpp"

namespace hier::device {

enum class ReduceOp : uint8_t { Sum, Prod, Min, Max, Land, Lor, Lxor, Band, Bor, Bxor, Count };

enum class ElemType : uint8_t {
#define HIER_REDUCE_TYPE(e, type, kind, mpi) e,
#include "device/reduce_types.def"
  Count
};

enum class TypeKind : uint8_t { Int, Float, Bool };

// Whether MPI 4.0 (6.9.2) defines op on elements of this kind: the kernels exist for exactly
// these. (MPICH 4.0.2 also takes MPI_LAND on MPI_FLOAT, and aborts on an assertion for
// MPI_DOUBLE: measured here. The other pairs are errors of the caller.)
HIER_HD constexpr bool op_allowed(ReduceOp op, TypeKind k) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Prod: return k != TypeKind::Bool;
    case ReduceOp::Min:
    case ReduceOp::Max: return k != TypeKind::Bool;
    case ReduceOp::Land:
    case ReduceOp::Lor:
    case ReduceOp::Lxor: return k != TypeKind::Float;
    case ReduceOp::Band:
    case ReduceOp::Bor:
    case ReduceOp::Bxor: return k == TypeKind::Int;
    default: return false;
  }
}

template <ReduceOp Op, class T>
HIER_HD inline T combine(T in, T io) {
  if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Prod) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;  // wraps, as two's complement hardware does
      const U a = static_cast<U>(in), b = static_cast<U>(io);
      return static_cast<T>(Op == ReduceOp::Sum ? static_cast<U>(a + b) : static_cast<U>(a * b));
    } else {
      return Op == ReduceOp::Sum ? in + io : in * io;
    }
  } else if constexpr (Op == ReduceOp::Min) {
    return io < in ? io : in;
  } else if constexpr (Op == ReduceOp::Max) {
    return io > in ? io : in;
  } else if constexpr (Op == ReduceOp::Land) {
    return static_cast<T>((in != T{}) && (io != T{}));
  } else if constexpr (Op == ReduceOp::Lor) {
    return static_cast<T>((in != T{}) || (io != T{}));
  } else if constexpr (Op == ReduceOp::Lxor) {
    return static_cast<T>((in != T{}) != (io != T{}));
  } else if constexpr (Op == ReduceOp::Band) {
    return static_cast<T>(in & io);
  } else if constexpr (Op == ReduceOp::Bor) {
    return static_cast<T>(in | io);
  } else {
    static_assert(Op == ReduceOp::Bxor);
    return static_cast<T>(in ^ io);
  }
}

// Elements [begin, end) (a GPU thread takes a grid-strided share; the host all of them).
template <ReduceOp Op, class T>
HIER_HD inline void reduce_range(const T* __restrict__ in, T* __restrict__ io, int64_t begin, int64_t end,
                                 int64_t step = 1) {
  for (int64_t i = begin; i < end; i += step) io[i] = combine<Op>(in[i], io[i]);
}

}  // namespace hier::device
