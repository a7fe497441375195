// The pack engine's API for the rest of libhier (and for tests and benchmarks, which link
// hier_dtype directly): pack / unpack whole elements of a canonical form on a backend.
#pragma once

#include <cstdint>

#include "device/backend.hpp"
#include "dtype/canon.hpp"

namespace hier::dtype {

// count * c.size bytes from the elements at `in` to `out`.
inline void pack(const Canon& c, const void* in, int64_t count, void* out,
                 const device::Backend& be = device::host()) {
  if (count > 0 && c.size > 0) be.pack(c.view, in, count, out);
}

inline void unpack(const Canon& c, const void* in, int64_t count, void* out,
                   const device::Backend& be = device::host()) {
  if (count > 0 && c.size > 0) be.unpack(c.view, in, count, out);
}

// Only the first `bytes` of the packed stream of `count` elements (a short message).
inline void unpack_prefix(const Canon& c, const void* in, int64_t bytes, int64_t count, void* out,
                          const device::Backend& be = device::host()) {
  if (count <= 0 || c.size <= 0 || bytes <= 0) return;
  if (bytes >= count * c.size) be.unpack(c.view, in, count, out);
  else be.unpack_prefix(c.view, in, bytes, count, out);
}

// count * size without overflow; -1 when it does not fit in `limit`.
inline int64_t packed_bytes(int64_t count, int64_t size, int64_t limit = INT64_MAX) {
  if (count < 0 || size < 0) return -1;
  if (size != 0 && count > limit / size) return -1;
  return count * size;
}

}  // namespace hier::dtype
