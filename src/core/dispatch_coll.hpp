// The one dispatch point of the coll family: collectives, blocking and nonblocking (hierarchical schedules plug in here).
// Every generated wrapper of the family calls dispatch_coll<Fn::X>(fwd, args...), where fwd()
// forwards the call to PMPI unchanged. Features add behaviour here, for the functions they
// handle, and return passthrough(fwd) for everything they cannot do exactly.
#pragma once

#include <climits>
#include <optional>
#include <type_traits>

#include "core/coll_device.hpp"
#include "core/wrap.hpp"
#include "exec/coll_quant.hpp"
#include "exec/entry.hpp"
#include "exec/prepare.hpp"

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
  if constexpr (B == Fn::Allreduce) return exec::allreduce(a...);  // tag: exec::take_algo_tag()
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

// The hierarchical path of a collective with buffers, safe for device memory. Order matters:
// every test before the communicator's agreement uses only what all ranks share (arguments,
// configuration), so all ranks reach the agreement, and the same schedule, together.
template <Fn B, class Fwd, class... Args>
Outcome with_buffers(Fwd& fwd, Args... a) {
  coll_device::Shape s = coll_device::shape(coll_device::Tag<B>{}, a...);
  if (!exec::may_rewrite(s.coll, s.type, s.count)) return passthrough(fwd);  // exec asks it again: cheap
  const device::MemKind kind = s.kind();
  // The communicator's context is built here, at the same call on every rank, with the flag
  // "some rank has a GPU runtime" agreed on with its levels (exec::Context::gpu_anywhere).
  if (!exec::host_schedules(s.comm)) {
    device::note_untouched(kind, config::coll_key(s.coll));
    return passthrough(fwd);
  }
  if (kind == device::MemKind::Host) {
    if (auto rc = hierarchical<B>(a...)) return {*rc, exec::take_algo_tag()};  // Hier, or HierInt8/4 (quantized)
    return passthrough(fwd);
  }
  // The runtime came after the agreement: the other ranks may run the schedule, so this one
  // must too, on host copies the MPI makes of its device buffers.
  coll_device::Staged staged(s);
  if (staged.rc() != MPI_SUCCESS) return {staged.rc(), diag::AlgoTag::Flat};
  auto rc = hierarchical<B>(a...);
  if (!rc) return passthrough(fwd);  // fwd holds the user's own pointers
  device::note_untouched(kind, "staged");
  const int back = staged.finish();
  return {*rc != MPI_SUCCESS ? *rc : back, exec::take_algo_tag()};
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
        if constexpr (B == Fn::Barrier) {
          if (auto rc = coll_detail::hierarchical<B>(coll_detail::narrow(args)...)) return {*rc, diag::AlgoTag::Hier};
        } else {
          return coll_detail::with_buffers<B>(fwd, coll_detail::narrow(args)...);
        }
      }
    }
  }
  return passthrough(fwd);
}

}  // namespace hier::core
