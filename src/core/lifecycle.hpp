// MPI_Init / Init_thread / Finalize / Session_init / Session_finalize: where libhier starts and
// stops. The version check runs before the MPI library is touched in any other way.
#pragma once

#include "core/wrap.hpp"

namespace hier::core {

// Before PMPI_Init*: stops the process if this build is for another MPI family.
void check_mpi_family_or_die();
// After a successful PMPI_Init*/Session_init: configuration, logging, activation. `at_init`: called
// from MPI_Init/MPI_Init_thread, where every rank is in the same call, so the configuration that
// must match is compared then (not when libhier starts lazily inside some other call).
void on_initialized(bool world_model, bool at_init = false);
// Before PMPI_Finalize/last Session_finalize: report, deactivation.
void on_finalizing();

template <Fn F, class Fwd, class... Args>
inline int lifecycle(Fwd& fwd, Args... args) {
  constexpr Fn B = base_of(F);
  if constexpr (B == Fn::Init || B == Fn::Init_thread) {
    check_mpi_family_or_die();
    const int rc = fwd();
    if (rc == MPI_SUCCESS) on_initialized(true, true);
    diag::record(F, diag::AlgoTag::Flat, rc, 0);
    return rc;
  } else if constexpr (B == Fn::Finalize) {
    diag::record(F, diag::AlgoTag::Flat, MPI_SUCCESS, 0);
    if (g_runtime.state.load() == State::Uninit) lazy_init();  // MPI started behind our back
    on_finalizing();
    return fwd();
  }
#if MPI_VERSION >= 4
  else if constexpr (B == Fn::Session_init) {
    check_mpi_family_or_die();
    const int rc = fwd();
    if (rc == MPI_SUCCESS) on_initialized(false);
    diag::record(F, diag::AlgoTag::Flat, rc, 0);
    return rc;
  } else if constexpr (B == Fn::Session_finalize) {
    diag::record(F, diag::AlgoTag::Flat, MPI_SUCCESS, 0);
    return fwd();
  }
#endif
  else {
    return fwd();
  }
}

// libhier's PMPI_Init / Init_thread / Finalize (core/tools.hpp): reached by a tool's MPI_* (a
// tool loaded before libhier, or after it on the way back from libhier's MPI_*) or by a binding
// that starts MPI through PMPI. libhier starts and stops with the MPI all the same; `real` is
// the MPI's PMPI_* (or a PMPI tool's after libhier).
template <Fn F, class Real>
inline int lifecycle_pmpi(Real& real) {
  constexpr Fn B = base_of(F);
  if (tl_depth != 0) return real();
  if constexpr (B == Fn::Init || B == Fn::Init_thread) {
    check_mpi_family_or_die();
    const int rc = real();
    if (rc == MPI_SUCCESS) on_initialized(true, true);
    return rc;
  } else if constexpr (B == Fn::Finalize) {
    if (g_runtime.state.load() == State::Uninit) lazy_init();
    on_finalizing();
    return real();
  } else {
    return real();
  }
}

}  // namespace hier::core
