// The host backend's reductions: one function per (op, element type) that MPI defines,
// instantiated from the HIER_HD bodies of device/reduce.hpp over the type table.
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "device/backend.hpp"
#include "device/reduce.hpp"

namespace hier::device {
namespace {

using ReduceFn = void (*)(const void*, void*, int64_t);
constexpr size_t kOps = static_cast<size_t>(ReduceOp::Count), kTypes = static_cast<size_t>(ElemType::Count);

template <ReduceOp Op, class T>
void run(const void* in, void* io, int64_t n) {
  reduce_range<Op>(static_cast<const T*>(in), static_cast<T*>(io), 0, n);
}

template <ReduceOp Op, class T, TypeKind K>
constexpr ReduceFn entry() {
  if constexpr (op_allowed(Op, K)) return &run<Op, T>;
  else return nullptr;
}

template <ReduceOp Op>
constexpr std::array<ReduceFn, kTypes> row() {
  return {
#define HIER_REDUCE_TYPE(e, type, kind, mpi) entry<Op, type, TypeKind::kind>(),
#include "device/reduce_types.def"
  };
}

template <size_t... O>
constexpr std::array<std::array<ReduceFn, kTypes>, kOps> table(std::index_sequence<O...>) {
  return {row<static_cast<ReduceOp>(O)>()...};
}
constexpr auto kTable = table(std::make_index_sequence<kOps>{});

}  // namespace

bool host_reduce(ReduceOp op, ElemType t, const void* in, void* inout, int64_t n) {
  if (op >= ReduceOp::Count || t >= ElemType::Count) return false;
  const ReduceFn f = kTable[static_cast<size_t>(op)][static_cast<size_t>(t)];
  if (!f) return false;
  if (n > 0) f(in, inout, n);
  return true;
}

}  // namespace hier::device
