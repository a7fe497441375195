// The one dispatch point of the coll family: collectives, blocking and nonblocking (hierarchical schedules plug in here).
// Every generated wrapper of the family calls dispatch_coll<Fn::X>(fwd, args...), where fwd()
// forwards the call to PMPI unchanged. Features add behaviour here, for the functions they
// handle, and return passthrough(fwd) for everything they cannot do exactly.
#pragma once

#include <climits>
#include <optional>
#include <type_traits>

#include "core/wrap.hpp"
#include "exec/entry.hpp"

namespace hier::core {

namespace coll_detail {
// Large-count (_c) variants reach the same code when every count fits an int; arrays of
// MPI_Count (the v-variants) and larger counts stay flat.
template <class T>
constexpr bool fits(const T& v) {
  if constexpr (std::is_same_v<T, MPI_Count>) return v >= 0 && v <= INT_MAX;
  else return true;
}
template <class T>
constexpr auto narrow(const T& v) {
  if constexpr (std::is_same_v<T, MPI_Count>) return static_cast<int>(v);
  else return v;
}

template <Fn B, class... Args>
std::optional<int> hierarchical(Args... a) {
  if constexpr (B == Fn::Allreduce) return exec::allreduce(a...);
  else if constexpr (B == Fn::Reduce) return exec::reduce(a...);
  else if constexpr (B == Fn::Reduce_scatter_block) return exec::reduce_scatter_block(a...);
  else if constexpr (B == Fn::Reduce_scatter) return exec::reduce_scatter(a...);
  else if constexpr (B == Fn::Allgather) return exec::allgather(a...);
  else if constexpr (B == Fn::Allgatherv) return exec::allgatherv(a...);
  else if constexpr (B == Fn::Bcast) return exec::bcast(a...);
  else if constexpr (B == Fn::Barrier) return exec::barrier(a...);
  else if constexpr (B == Fn::Alltoall) return exec::alltoall(a...);
  else return std::nullopt;
}

template <Fn B>
constexpr bool has_hierarchical = B == Fn::Allreduce || B == Fn::Reduce || B == Fn::Reduce_scatter_block ||
                                  B == Fn::Reduce_scatter || B == Fn::Allgather || B == Fn::Allgatherv ||
                                  B == Fn::Bcast || B == Fn::Barrier || B == Fn::Alltoall;
}  // namespace coll_detail

template <Fn F, class Fwd, class... Args>
inline Outcome dispatch_coll(Fwd& fwd, Args... args) {
  constexpr Fn B = base_of(F);
  if constexpr (coll_detail::has_hierarchical<B>) {
    // v-variants of the large-count family pass arrays of MPI_Count: not convertible, flat.
    if constexpr ((std::is_convertible_v<decltype(coll_detail::narrow(args)), decltype(args)> && ...) &&
                  (F == B || (B != Fn::Reduce_scatter && B != Fn::Allgatherv))) {
      if ((coll_detail::fits(args) && ...)) {
        if (auto rc = coll_detail::hierarchical<B>(coll_detail::narrow(args)...)) return {*rc, diag::AlgoTag::Hier};
      }
    }
  }
  return passthrough(fwd);
}

}  // namespace hier::core
