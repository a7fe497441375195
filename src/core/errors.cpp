#include "core/errors.hpp"

#include <atomic>
#include <exception>
#include <new>

#include "diag/log.hpp"

namespace hier::core {

int raise_on(MPI_Comm comm, int rc) {
  if (rc != MPI_SUCCESS && comm != MPI_COMM_NULL) PMPI_Comm_call_errhandler(comm, rc);
  return rc;
}

int on_exception(MPI_Comm comm, const char* function) {
  int rc = MPI_ERR_INTERN;
  const char* what = "unknown exception";
  try {
    throw;
  } catch (const std::bad_alloc& e) {
    rc = MPI_ERR_NO_MEM;
    what = e.what();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true))
    log::write(config::LogLevel::Warn, "core", __FILE__, __LINE__, "%s: internal error in libhier (%s); returned as %s",
               function, what, rc == MPI_ERR_NO_MEM ? "MPI_ERR_NO_MEM" : "MPI_ERR_INTERN");
  int initialized = 0, finalized = 0;
  PMPI_Initialized(&initialized);
  PMPI_Finalized(&finalized);
  if (initialized && !finalized) PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_SELF : comm, rc);
  return rc;
}

}  // namespace hier::core
