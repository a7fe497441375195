// The one dispatch point of the coll family: collectives, blocking and nonblocking (hierarchical schedules plug in here).
// Every generated wrapper of the family calls dispatch_coll<Fn::X>(fwd, args...), where fwd()
// forwards the call to PMPI unchanged. Features add behaviour here, for the functions they
// handle, and return passthrough(fwd) for everything they cannot do exactly.
#pragma once

#include "core/wrap.hpp"

namespace hier::core {

template <Fn F, class Fwd, class... Args>
inline Outcome dispatch_coll(Fwd& fwd, Args... args) {
  return passthrough(fwd);
}

}  // namespace hier::core
