#include "dtype/cache.hpp"

#include <mutex>

#include "core/hooks.hpp"
#include "dtype/decode.hpp"
#include "dtype/tune.hpp"

namespace hier::dtype {
namespace {

int g_keyval = MPI_KEYVAL_INVALID;
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
  std::call_once(g_keyval_once, [] {
    PMPI_Type_create_keyval(copy_attr, delete_attr, &g_keyval, nullptr);
    tune_model();  // read HIER_TUNE_FILE now: a bad file is reported once, early
    core::add_finalize_hook([] {
      if (g_keyval != MPI_KEYVAL_INVALID) PMPI_Type_free_keyval(&g_keyval);
    });
  });
  return g_keyval;
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
  if (g_keyval == MPI_KEYVAL_INVALID || is_named(t)) return nullptr;
  return attached(t);
}

CanonRef lookup(MPI_Datatype t) {
  Canon* c = peek(t);
  if (!c) return {};
  c->retain();
  return CanonRef(c);
}

}  // namespace hier::dtype
