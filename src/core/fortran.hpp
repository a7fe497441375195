// Helpers of the Fortran wrappers (all of Open MPI's bindings; MPICH's mpi_f08 for calls
// without buffers, whose TYPE(MPI_Status) has the C layout). Fortran's MPI_IN_PLACE, MPI_BOTTOM and
// MPI_STATUS(ES)_IGNORE are addresses of common blocks in the Fortran library, not the C
// constants; they are looked up by name at first use, so libhier does not link the Fortran
// libraries into C programs.
#pragma once

#include <mpi.h>

#ifndef MPI_F_STATUS_SIZE  // MPI-4 name; Open MPI 4.1 (MPI-3.1) lacks it
#define MPI_F_STATUS_SIZE (static_cast<int>(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif

static_assert(sizeof(MPI_Fint) == sizeof(int), "libhier's Fortran wrappers assume MPI_Fint is a C int");

namespace hier::fortran {

struct Sentinels {
  const void* in_place = nullptr;
  const void* bottom = nullptr;
  const void* status_ignore = nullptr;
  const void* statuses_ignore = nullptr;
};
const Sentinels& sentinels();

inline void* buf(void* p) {
  const Sentinels& s = sentinels();
  if (p && p == s.in_place) return MPI_IN_PLACE;
  if (p && p == s.bottom) return MPI_BOTTOM;
  return p;
}
inline bool is_status_ignore(const MPI_Fint* p) { return p == sentinels().status_ignore || p == nullptr; }
inline bool is_statuses_ignore(const MPI_Fint* p) { return p == sentinels().statuses_ignore || p == nullptr; }

// Number of peers a per-peer array of an (intra- or inter-) communicator holds.
int comm_peers(MPI_Comm comm);

}  // namespace hier::fortran
