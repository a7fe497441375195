// What the executor needs to know about a user datatype, and local copies that respect its
// layout (never writing into the holes of a non-contiguous type in a user buffer).
#pragma once

#include <mpi.h>

#include <cstdint>

#include "diag/trace.hpp"

namespace hier::exec {

struct TypeInfo {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Count size = 0;       // bytes of data per element
  MPI_Aint extent = 0;      // stride between elements
  MPI_Aint true_lb = 0;     // first byte touched, relative to the element's address
  MPI_Aint true_extent = 0;
  bool dense = false;       // size == extent == true_extent, true_lb == 0: plain bytes
  bool ok = false;          // a usable committed type with positive size and extent

  // Bytes a buffer of n elements spans from its first touched byte.
  int64_t span(int64_t n) const { return n <= 0 ? 0 : (n - 1) * extent + true_extent; }
};

TypeInfo type_info(MPI_Datatype t);

// PMPI_Reduce_local, timed as a kernel under HIER_TRACE (diag::trace::Kernel: off, one flag test).
inline int reduce_local(const void* in, void* inout, int n, MPI_Datatype t, MPI_Op op) {
  diag::trace::Kernel k;
  return PMPI_Reduce_local(in, inout, n, t, op);
}

// These never communicate (safe under MPI_THREAD_MULTIPLE): dense types are memcpy, others go
// through libhier's datatype engine or PMPI_Pack / PMPI_Unpack, as dtype's planner prefers.
// n elements of type t from src to dst (distinct buffers).
int typed_copy(const void* src, void* dst, int64_t n, const TypeInfo& t);
// n elements of t at src, as packed bytes at dst (and back).
int pack(const void* src, int64_t n, const TypeInfo& t, void* dst);
int unpack(const void* src, int64_t n, const TypeInfo& t, void* dst);

}  // namespace hier::exec
