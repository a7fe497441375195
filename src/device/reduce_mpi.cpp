#include "device/reduce_mpi.hpp"

#include <climits>
#include <cstdint>
#include <type_traits>

namespace hier::device {
namespace {

template <class T>
constexpr ElemType integer_type() {
  static_assert(std::is_integral_v<T> && sizeof(T) <= 8);
  constexpr bool s = std::is_signed_v<T>;
  switch (sizeof(T)) {
    case 1: return s ? ElemType::I8 : ElemType::U8;
    case 2: return s ? ElemType::I16 : ElemType::U16;
    case 4: return s ? ElemType::I32 : ElemType::U32;
    default: return s ? ElemType::I64 : ElemType::U64;
  }
}

}  // namespace

std::optional<ElemType> elem_type_of(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return std::nullopt;
#define HIER_REDUCE_TYPE(e, type, kind, mpi) \
  if (t == mpi) return ElemType::e;
#include "device/reduce_types.def"
  struct Named {
    MPI_Datatype t;
    ElemType e;
  };
  const Named named[] = {
      {MPI_SIGNED_CHAR, integer_type<signed char>()},   {MPI_UNSIGNED_CHAR, integer_type<unsigned char>()},
      {MPI_SHORT, integer_type<short>()},
      {MPI_UNSIGNED_SHORT, integer_type<unsigned short>()}, {MPI_INT, integer_type<int>()},
      {MPI_UNSIGNED, integer_type<unsigned>()},         {MPI_LONG, integer_type<long>()},
      {MPI_UNSIGNED_LONG, integer_type<unsigned long>()}, {MPI_LONG_LONG, integer_type<long long>()},
      {MPI_UNSIGNED_LONG_LONG, integer_type<unsigned long long>()},
  };
  for (const Named& n : named)
    if (t == n.t) return n.e;
  return std::nullopt;
}

std::optional<ReduceOp> reduce_op_of(MPI_Op op) {
  struct Named {
    MPI_Op op;
    ReduceOp r;
  };
  const Named named[] = {{MPI_SUM, ReduceOp::Sum},   {MPI_PROD, ReduceOp::Prod}, {MPI_MIN, ReduceOp::Min},
                         {MPI_MAX, ReduceOp::Max},   {MPI_LAND, ReduceOp::Land}, {MPI_LOR, ReduceOp::Lor},
                         {MPI_LXOR, ReduceOp::Lxor}, {MPI_BAND, ReduceOp::Band}, {MPI_BOR, ReduceOp::Bor},
                         {MPI_BXOR, ReduceOp::Bxor}};
  for (const Named& n : named)
    if (op == n.op) return n.r;
  return std::nullopt;
}

}  // namespace hier::device
