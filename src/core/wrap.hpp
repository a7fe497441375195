// What every generated wrapper uses: export macro, re-entry guard, outcome, statistics.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "core/runtime.hpp"
#include "diag/stats.hpp"
#include "hier/fn.hpp"

#define HIER_EXPORT __attribute__((visibility("default")))

namespace hier::core {

// Depth of libhier frames on this thread: MPI calls made from inside libhier (or from inside the
// MPI library, e.g. ROMIO) go straight to PMPI. Thread-local, never a global flag.
extern thread_local int tl_depth __attribute__((tls_model("initial-exec")));

inline bool should_intercept() {
  if (tl_depth != 0) return false;
  const State s = g_runtime.state.load(std::memory_order_relaxed);
  if (s == State::Active) return true;
  return s == State::Uninit && lazy_init();
}

// The size of the datatype looked up during the current wrapped call: dispatch often needs it
// before the statistics do, and one PMPI_Type_size_x less is a measurable part of the passthrough
// cost. Valid inside one top-level call only (a Guard starts a new one), so a handle freed and
// reused later can never hit a stale entry.
struct TypeSizeMemo {
  MPI_Datatype type;
  MPI_Count size;
  bool valid;
};
extern thread_local TypeSizeMemo tl_type_size __attribute__((tls_model("initial-exec")));

inline MPI_Count type_size(MPI_Datatype t) {
  if (tl_type_size.valid && tl_type_size.type == t) return tl_type_size.size;
  MPI_Count s = 0;
  if (PMPI_Type_size_x(t, &s) != MPI_SUCCESS) return -1;
  tl_type_size = {t, s, true};
  return s;
}

struct Guard {
  Guard() {
    ++tl_depth;
    tl_type_size.valid = false;
  }
  ~Guard() { --tl_depth; }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
};

// The result of a family dispatch: the MPI return code and how the call was carried out.
struct Outcome {
  int rc;
  diag::AlgoTag algo;
};

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
