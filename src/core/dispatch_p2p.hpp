// The one dispatch point of the p2p family: point-to-point calls (packing of non-contiguous datatypes plugs in here).
// Every generated wrapper of the family calls dispatch_p2p<Fn::X>(fwd, args...), where fwd()
// forwards the call to PMPI unchanged. Features add behaviour here, for the functions they
// handle, and return passthrough(fwd) for everything they cannot do exactly.
#pragma once

#include "core/wrap.hpp"

namespace hier::core {

template <Fn F, class Fwd, class... Args>
inline Outcome dispatch_p2p(Fwd& fwd, Args... args) {
  return passthrough(fwd);
}

}  // namespace hier::core
