// The host backend's reductions: one function per (op, element type) that MPI defines,
// instantiated from the HIER_HD bodies of device/reduce.hpp over the type table.
#include <cstdint>

#include "device/backend.hpp"
#include "device/reduce.hpp"
#include "device/reduce_table.hpp"

namespace hier::device {
namespace {

using ReduceFn = void (*)(const void*, void*, int64_t);

template <ReduceOp Op, class T>
void run(const void* in, void* io, int64_t n) {
  reduce_range<Op>(static_cast<const T*>(in), static_cast<T*>(io), 0, n);
}

template <ReduceOp Op, class T>
struct HostPick {
  static constexpr ReduceFn get() { return &run<Op, T>; }
};

}  // namespace

bool host_reduce(ReduceOp op, ElemType t, const void* in, void* inout, int64_t n) {
  const ReduceFn f = ReduceTable<ReduceFn, HostPick>::find(op, t);
  if (!f) return false;
  if (n > 0) f(in, inout, n);
  return true;
}

}  // namespace hier::device
