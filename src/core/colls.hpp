// The rows of config/collectives.def as the coll dispatch needs them: for each collective libhier
// can rewrite, its config::Coll and the MPI functions (blocking, nonblocking, persistent) that
// reach its executor entry point. Generated from the one table; nothing here is a list of its own.
#pragma once

#include <iterator>

#include "config/config.hpp"
#include "hier/fn.hpp"

namespace hier::core {

struct CollRow {
  config::Coll coll;
  Fn blocking, nonblocking, persistent;
  bool device;  // the Device column: its schedules run on device buffers too
};
inline constexpr CollRow kColls[] = {
#define HIER_COLL(name, key, blocking, nonblocking, persistent, pipelined, quantized, flat, op, cartesian, any, buffers, \
                  builder, quant, device)                                                                         \
  {config::Coll::name, Fn::blocking, Fn::nonblocking, Fn::persistent, device != 0},
#include "config/collectives.def"
};
static_assert(std::size(kColls) == static_cast<size_t>(config::Coll::Count));

// The row that f belongs to, in any of its three forms; -1: not a collective libhier rewrites.
// An index, not a pointer: GCC's -fsanitize=undefined (the asan preset) cannot evaluate a
// comparison of a pointer into the table with null in a constant expression.
constexpr int coll_row(Fn f) {
  for (int i = 0; i < static_cast<int>(std::size(kColls)); ++i)
    if (kColls[i].blocking == f || kColls[i].nonblocking == f || kColls[i].persistent == f) return i;
  return -1;
}
// The collective whose schedule blocking function B runs (B must be a row's blocking form).
constexpr config::Coll coll_of(Fn b) { return kColls[coll_row(b)].coll; }

}  // namespace hier::core
