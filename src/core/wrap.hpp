// What every generated wrapper uses: export macro, re-entry guard, outcome, statistics.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "base/runtime.hpp"
#include "diag/stats.hpp"
#include "hier/fn.hpp"

#define HIER_EXPORT __attribute__((visibility("default")))

namespace hier::core {

using base::g_runtime;
using base::Guard;
using base::State;
using base::tl_depth;
using base::type_size;

// Some bindings start MPI without the C MPI_Init (MPICH's mpi_f08 calls PMPI_Init): the first
// wrapped call after that initializes libhier (core/lifecycle.cpp). Returns whether libhier is
// now active.
bool lazy_init();

inline bool should_intercept() {
  if (tl_depth != 0) return false;
  const State s = g_runtime.state.load(std::memory_order_relaxed);
  if (s == State::Active) return true;
  return s == State::Uninit && lazy_init();
}

// The result of a family dispatch: the MPI return code and how the call was carried out. `own`:
// the error is libhier's own making on a call it left to the MPI (a staging copy the GPU runtime
// refused, no memory for it), so no error handler has seen it yet: the wrapper raises it on the
// call's communicator, as the MPI raises its own (MPI_ERRORS_ARE_FATAL stops the job rather than
// leave the program a request that was never made).
struct Outcome {
  int rc;
  diag::AlgoTag algo;
  bool own = false;
};

// An error of libhier's own making on a call it leaves to the MPI (see Outcome::own).
inline Outcome own_error(int rc) { return {rc, diag::AlgoTag::Flat, rc != MPI_SUCCESS}; }

// Forwards to the MPI library unchanged; the default of every family.
template <class Fwd>
inline Outcome passthrough(Fwd& fwd) {
  return {fwd(), diag::AlgoTag::Flat};
}

inline void record(Fn f, const Outcome& o, uint64_t bytes) { diag::record(f, o.algo, o.rc, bytes); }

// n elements of type t in bytes; only evaluated after the MPI accepted the arguments.
inline uint64_t sz(MPI_Count n, MPI_Datatype t) {
  if (n <= 0 || t == MPI_DATATYPE_NULL) return 0;
  const MPI_Count s = type_size(t);
  return s > 0 ? static_cast<uint64_t>(n) * static_cast<uint64_t>(s) : 0;
}

}  // namespace hier::core
