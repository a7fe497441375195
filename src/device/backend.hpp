// The device backends behind one table (host today; HIP/CUDA fill the same entries later, an
// absent backend is a null entry). Each executes block programs (device/blocks.hpp).
#pragma once

#include <cstdint>

#include "device/blocks.hpp"
#include "device/reduce.hpp"

namespace hier::device {

struct Backend {
  const char* name;
  // `count` elements of the program, element e at strided + e * extent, to/from a packed
  // buffer of count * size bytes.
  void (*pack)(const BlockProgram& p, const void* strided, int64_t count, void* packed);
  void (*unpack)(const BlockProgram& p, const void* packed, int64_t count, void* strided);
  // Unpacks only the first `bytes` (< count * size) of the packed stream: a short message.
  void (*unpack_prefix)(const BlockProgram& p, const void* packed, int64_t bytes, int64_t count,
                        void* strided);
  // inout[i] = in[i] op inout[i] for n elements (device/reduce.hpp, MPI_Reduce_local's
  // semantics); false where MPI does not define op on the type (nothing written).
  bool (*reduce)(ReduceOp op, ElemType t, const void* in, void* inout, int64_t n);
};

enum class BackendKind : uint8_t { Host, Hip, Cuda, Count };

// nullptr when the backend is not built in (or its module could not be loaded).
const Backend* backend(BackendKind k);
inline const Backend& host() { return *backend(BackendKind::Host); }

}  // namespace hier::device
