// The one dispatch point of the request family: the completion family (completion of libhier's own requests plugs in here).
// Every generated wrapper of the family calls dispatch_request<Fn::X>(fwd, args...), where fwd()
// forwards the call to PMPI unchanged. Features add behaviour here, for the functions they
// handle, and return passthrough(fwd) for everything they cannot do exactly.
#pragma once

#include <optional>

#include "core/wrap.hpp"
#include "dtype/requests.hpp"

namespace hier::core {

template <Fn F, class Fwd, class... Args>
inline Outcome dispatch_request(Fwd& fwd, Args... args) {
  // Fast path: no libhier-owned request exists, nothing to finish (one relaxed load).
  if (!dtype::any_owned()) return passthrough(fwd);
  dtype::progress_detached();
  constexpr Fn B = base_of(F);
  std::optional<int> rc;
  if constexpr (B == Fn::Wait) rc = dtype::wait(args...);
  else if constexpr (B == Fn::Test) rc = dtype::test(args...);
  else if constexpr (B == Fn::Waitall) rc = dtype::waitall(args...);
  else if constexpr (B == Fn::Testall) rc = dtype::testall(args...);
  else if constexpr (B == Fn::Waitany) rc = dtype::waitany(args...);
  else if constexpr (B == Fn::Testany) rc = dtype::testany(args...);
  else if constexpr (B == Fn::Waitsome) rc = dtype::waitsome(args...);
  else if constexpr (B == Fn::Testsome) rc = dtype::testsome(args...);
  else if constexpr (B == Fn::Request_free) rc = dtype::request_free(args...);
  // MPI_Cancel acts on the MPI's own request: completion then sees a cancelled status.
  if (!rc) return passthrough(fwd);
  return {*rc, diag::AlgoTag::Packed};
}

}  // namespace hier::core
