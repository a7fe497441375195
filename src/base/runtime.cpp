#include "base/runtime.hpp"

namespace hier::base {

Runtime g_runtime;
thread_local int tl_depth __attribute__((tls_model("initial-exec"))) = 0;
thread_local TypeSizeMemo tl_type_size __attribute__((tls_model("initial-exec"))) = {MPI_DATATYPE_NULL, 0, false};

const char* built_for_mpi() {
#if defined(OMPI_MAJOR_VERSION)
  return "Open MPI";
#elif defined(MPICH_VERSION)
  return "MPICH";
#else
#error "libhier supports Open MPI and MPICH"
#endif
}

bool library_matches_build(const std::string& v) {
  // MPICH derivatives (e.g. Cray MPICH) also say "MPICH"; Open MPI says "Open MPI".
  return v.find(built_for_mpi()) != std::string::npos;
}

}  // namespace hier::base
