// Process-wide state of libhier that every layer may read: whether it is active, this rank, the
// MPI library, and the per-thread re-entry depth (MPI calls made from inside libhier go straight
// to PMPI). A leaf: it includes nothing of libhier's.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace hier::base {

enum class State : uint8_t {
  Uninit = 0,   // MPI not initialized yet (or initialized behind libhier's back: see lazy_init)
  Active = 1,   // intercepting
  Passive = 2,  // HIER_DISABLE=1, or finalized: everything forwards
};

struct Runtime {
  std::atomic<State> state{State::Uninit};
  bool finalize_seen = false;       // the report was written at MPI_Finalize
  int world_rank = -1;
  int world_size = 0;
  std::string mpi_library;          // MPI_Get_library_version
};

// Zero-initialized static storage; no constructor does work at load time.
extern Runtime g_runtime;

// The MPI family this build is for, and whether `library_version` names it.
const char* built_for_mpi();
bool library_matches_build(const std::string& library_version);

// Depth of libhier frames on this thread: MPI calls made from inside libhier (or from inside the
// MPI library, e.g. ROMIO) go straight to PMPI. Thread-local, never a global flag.
extern thread_local int tl_depth __attribute__((tls_model("initial-exec")));

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

// One libhier frame on this thread (see tl_depth).
struct Guard {
  Guard() {
    ++tl_depth;
    tl_type_size.valid = false;
  }
  ~Guard() { --tl_depth; }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
};

}  // namespace hier::base
