// Process-wide state of libhier: whether it is active, this rank, the MPI library.
#pragma once

#include <atomic>
#include <string>

namespace hier::core {

struct Runtime {
  std::atomic<bool> active{false};  // initialized, not HIER_DISABLE, not finalized
  int world_rank = -1;
  int world_size = 0;
  std::string mpi_library;          // MPI_Get_library_version
};

// Zero-initialized static storage; no constructor does work at load time.
extern Runtime g_runtime;

// The MPI family this build is for, and whether `library_version` names it.
const char* built_for_mpi();
bool library_matches_build(const std::string& library_version);

}  // namespace hier::core
