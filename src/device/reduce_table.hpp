// The dispatch table of the reductions, [op][element type], built at compile time from the
// type table (device/reduce_types.def): an entry exists exactly for the pairs MPI defines
// (op_allowed), null elsewhere. The host backend (device/reduce_host.cpp) and the GPU module
// (gpu/module.cu) fill it with their own entry kind: Pick<Op, T>::get() gives one entry.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "device/reduce.hpp"

namespace hier::device {

inline constexpr size_t kReduceOps = static_cast<size_t>(ReduceOp::Count);
inline constexpr size_t kReduceTypes = static_cast<size_t>(ElemType::Count);

template <class F, template <ReduceOp, class> class Pick>
struct ReduceTable {
  template <ReduceOp Op, class T, TypeKind K>
  static constexpr F entry() {
    if constexpr (op_allowed(Op, K)) return Pick<Op, T>::get();
    else return nullptr;
  }
  template <ReduceOp Op>
  static constexpr std::array<F, kReduceTypes> row() {
    return {
#define HIER_REDUCE_TYPE(e, type, kind, mpi) entry<Op, type, TypeKind::kind>(),
#include "device/reduce_types.def"
    };
  }
  template <size_t... O>
  static constexpr std::array<std::array<F, kReduceTypes>, kReduceOps> rows(std::index_sequence<O...>) {
    return {row<static_cast<ReduceOp>(O)>()...};
  }
  static constexpr std::array<std::array<F, kReduceTypes>, kReduceOps> table =
      rows(std::make_index_sequence<kReduceOps>{});

  // The entry for (op, t); null for a pair MPI does not define or a value out of range.
  static F find(ReduceOp op, ElemType t) {
    if (op >= ReduceOp::Count || t >= ElemType::Count) return nullptr;
    return table[static_cast<size_t>(op)][static_cast<size_t>(t)];
  }
};

}  // namespace hier::device
