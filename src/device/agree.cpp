#include "device/agree.hpp"

#include <cstdint>
#include <mutex>

#include "core/hooks.hpp"
#include "device/pointer.hpp"

namespace hier::device {
namespace {

std::mutex g_mu;
int g_keyval = MPI_KEYVAL_INVALID;

int keyval() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_keyval == MPI_KEYVAL_INVALID) {
    // The value is a small integer stored in the pointer: nothing to copy or delete.
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &g_keyval, nullptr);
    static bool hooked = false;
    if (!hooked) {
      hooked = true;
      core::add_finalize_hook([] {
        std::lock_guard<std::mutex> l(g_mu);
        if (g_keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&g_keyval);
        g_keyval = MPI_KEYVAL_INVALID;
      });
    }
  }
  return g_keyval;
}

constexpr intptr_t kHost = 1, kMpiOnly = 2;

}  // namespace

bool host_schedules_agreed(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return false;
  const int kv = keyval();
  void* attr = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, kv, &attr, &found) != MPI_SUCCESS) return false;
  if (found) return reinterpret_cast<intptr_t>(attr) == kHost;
  int inter = 0, size = 1;
  PMPI_Comm_test_inter(comm, &inter);
  PMPI_Comm_size(comm, &size);
  int gpu = 1;  // intercommunicators and single ranks: libhier has nothing to do there anyway
  if (!inter && size > 1) {
    gpu = runtime() != Runtime::None ? 1 : 0;
    if (PMPI_Allreduce(MPI_IN_PLACE, &gpu, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) gpu = 1;
  }
  const intptr_t v = gpu ? kMpiOnly : kHost;
  PMPI_Comm_set_attr(comm, kv, reinterpret_cast<void*>(v));
  return v == kHost;
}

}  // namespace hier::device
