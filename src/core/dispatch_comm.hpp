// The one dispatch point of the comm family: communicator lifecycle (per-communicator state plugs in here).
// Every generated wrapper of the family calls dispatch_comm<Fn::X>(fwd, args...), where fwd()
// forwards the call to PMPI unchanged. Features add behaviour here, for the functions they
// handle, and return passthrough(fwd) for everything they cannot do exactly.
#pragma once

#include <tuple>

#include "core/errors.hpp"
#include "core/wrap.hpp"
#include "exec/context.hpp"

namespace hier::core {

namespace comm_detail {

// A call that makes a communicator from `parent` (collective over it): where the MPI runs out
// of communicators (MPICH's context IDs, which libhier's shadow and level communicators use
// too), libhier releases its idle ones (exec::release_idle) and the call is made again, so that
// the program never fails where the MPI alone would succeed. The first try returns its error
// instead of raising it; the last one's error goes to `parent`'s handler, as the MPI's would.
// `made`: where the call writes the new communicator. It inherits `parent`'s error handler (MPI
// 4.0, 9.3), which is MPI_ERRORS_RETURN while the call runs: the program's is set on it after.
template <class Fwd>
Outcome make_comm(Fwd& fwd, MPI_Comm parent, MPI_Comm* made) {
  int inter = 1;
  MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
  if (parent == MPI_COMM_NULL || PMPI_Comm_test_inter(parent, &inter) != MPI_SUCCESS || inter ||
      PMPI_Comm_get_errhandler(parent, &eh) != MPI_SUCCESS)
    return passthrough(fwd);
  PMPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
  int rc = fwd();
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &cls);
  // MPICH's "Too many communicators" is of class MPI_ERR_OTHER, and every rank of `parent` gets
  // it alike (the IDs are agreed over it); argument errors have classes of their own.
  if (cls == MPI_ERR_OTHER && exec::release_idle(parent) > 0) rc = fwd();
  PMPI_Comm_set_errhandler(parent, eh);
  if (rc == MPI_SUCCESS && made && *made != MPI_COMM_NULL) PMPI_Comm_set_errhandler(*made, eh);
  PMPI_Errhandler_free(&eh);
  if (rc != MPI_SUCCESS) raise_on(parent, rc);
  return {rc, diag::AlgoTag::Flat};
}

}  // namespace comm_detail

template <Fn F, class Fwd, class... Args>
inline Outcome dispatch_comm(Fwd& fwd, Args... args) {
  constexpr Fn B = base_of(F);
  if constexpr (B == Fn::Comm_dup || B == Fn::Comm_split || B == Fn::Comm_split_type || B == Fn::Comm_create) {
    const std::tuple<Args...> a(args...);
    return comm_detail::make_comm(fwd, std::get<0>(a), std::get<sizeof...(Args) - 1>(a));
  } else {
    return passthrough(fwd);
  }
}

}  // namespace hier::core
