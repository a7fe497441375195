// Process-wide state of libhier: whether it is active, this rank, the MPI library.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace hier::core {

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

// Some bindings start MPI without the C MPI_Init (MPICH's mpi_f08 calls PMPI_Init): the first
// wrapped call after that initializes libhier. Returns whether libhier is now active.
bool lazy_init();

// The MPI family this build is for, and whether `library_version` names it.
const char* built_for_mpi();
bool library_matches_build(const std::string& library_version);

}  // namespace hier::core
