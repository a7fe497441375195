#include "core/fortran.hpp"

#include <dlfcn.h>

#include <string>

namespace hier::fortran {
#if defined(OMPI_MAJOR_VERSION)
namespace {
const void* lookup(const char* base) {
  // Open MPI's Fortran library defines the common block under one of several manglings.
  const std::string names[] = {std::string(base) + "_", base, std::string(base) + "__"};
  for (const std::string& n : names)
    if (const void* p = dlsym(RTLD_DEFAULT, n.c_str())) return p;
  return nullptr;
}
}  // namespace
#endif

const Sentinels& sentinels() {
  static const Sentinels s = [] {
    Sentinels x;
#if defined(OMPI_MAJOR_VERSION)
    x.in_place = lookup("mpi_fortran_in_place");
    x.bottom = lookup("mpi_fortran_bottom");
    x.status_ignore = lookup("mpi_fortran_status_ignore");
    x.statuses_ignore = lookup("mpi_fortran_statuses_ignore");
#else
    // MPICH: only mpi_f08 entry points without buffers are wrapped (see the generator).
    x.status_ignore = dlsym(RTLD_DEFAULT, "MPIR_F08_MPI_STATUS_IGNORE_OBJ");
    x.statuses_ignore = dlsym(RTLD_DEFAULT, "MPIR_F08_MPI_STATUSES_IGNORE_OBJ");
#endif
    return x;
  }();
  return s;
}

int comm_peers(MPI_Comm comm) {
  int inter = 0, n = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter)
    PMPI_Comm_remote_size(comm, &n);
  else
    PMPI_Comm_size(comm, &n);
  return n;
}

}  // namespace hier::fortran
