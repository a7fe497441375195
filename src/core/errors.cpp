#include "core/errors.hpp"

#include <atomic>
#include <cstdio>
#include <exception>
#include <new>

#include "diag/log.hpp"

namespace hier::core {

int raise_on(MPI_Comm comm, int rc) {
  if (rc != MPI_SUCCESS && comm != MPI_COMM_NULL) PMPI_Comm_call_errhandler(comm, rc);
  return rc;
}

int raise_own(MPI_Comm comm, int rc, const char* function) {
  if (rc == MPI_SUCCESS) return rc;
  static std::atomic<int> logged{0};
  if (logged.fetch_add(1, std::memory_order_relaxed) < 3) {
    char text[MPI_MAX_ERROR_STRING] = {0};
    int len = 0;
    if (PMPI_Error_string(rc, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "error %d", rc);
    log::write(config::LogLevel::Warn, "core", __FILE__, __LINE__,
               "%s failed inside libhier before the MPI saw it (%s: a GPU runtime copy or staging memory); "
               "raised through the communicator's error handler",
               function, text);
  }
  return raise_on(comm, rc);
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
