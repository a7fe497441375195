#include "dtype/cache.hpp"

#include <atomic>
#include <mutex>

#include "base/hooks.hpp"
#include "dtype/decode.hpp"
#include "dtype/tune.hpp"

namespace hier::dtype {
namespace {

// Set once (under g_keyval_once), read on every point-to-point call: an atomic read is the fast
// path, so the hot path takes no std::call_once (a pthread_once plus thread-local accesses).
std::atomic<int> g_keyval{MPI_KEYVAL_INVALID};
std::atomic<bool> g_keyval_made{false};
std::once_flag g_keyval_once;

int copy_attr(MPI_Datatype, int, void*, void* in, void* out, int* flag) {
  static_cast<Canon*>(in)->retain();
  *static_cast<void**>(out) = in;
  *flag = 1;
  return MPI_SUCCESS;
}

int delete_attr(MPI_Datatype, int, void* attr, void*) {
  static_cast<Canon*>(attr)->release();
  return MPI_SUCCESS;
}

int keyval() {
  if (g_keyval_made.load(std::memory_order_acquire)) return g_keyval.load(std::memory_order_relaxed);
  std::call_once(g_keyval_once, [] {
    int k = MPI_KEYVAL_INVALID;
    PMPI_Type_create_keyval(copy_attr, delete_attr, &k, nullptr);
    g_keyval.store(k, std::memory_order_relaxed);
    tune_model();  // read HIER_TUNE_FILE now: a bad file is reported once, early
    base::add_finalize_hook([] {
      int k = g_keyval.exchange(MPI_KEYVAL_INVALID);
      if (k != MPI_KEYVAL_INVALID) PMPI_Type_free_keyval(&k);
    });
  });
  g_keyval_made.store(true, std::memory_order_release);
  return g_keyval.load(std::memory_order_relaxed);
}

Canon* attached(MPI_Datatype t) {
  void* v = nullptr;
  int flag = 0;
  if (PMPI_Type_get_attr(t, keyval(), &v, &flag) != MPI_SUCCESS || !flag) return nullptr;
  return static_cast<Canon*>(v);
}

Canon* attach(MPI_Datatype t) {
  Canon* c = canonicalize(t);  // one reference: the attribute's
  PMPI_Type_set_attr(t, keyval(), c);
  return c;
}

}  // namespace

void on_commit(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL || is_named(t) || attached(t)) return;
  attach(t);
}

Canon* peek(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return nullptr;
  // No attribute: predefined, or committed while libhier was not watching. Never canonicalize
  // here: an uncommitted type must reach the MPI and fail there.
  if (g_keyval.load(std::memory_order_relaxed) == MPI_KEYVAL_INVALID || is_named(t)) return nullptr;
  return attached(t);
}

CanonRef lookup(MPI_Datatype t) {
  Canon* c = peek(t);
  if (!c) return {};
  c->retain();
  return CanonRef(c);
}

}  // namespace hier::dtype
