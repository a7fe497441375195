#include "exec/typed.hpp"

#include <climits>
#include <cstring>
#include <mutex>

#include "core/hooks.hpp"

namespace hier::exec {

TypeInfo type_info(MPI_Datatype t) {
  TypeInfo i;
  i.type = t;
  if (t == MPI_DATATYPE_NULL) return i;
  MPI_Aint lb = 0;
  if (PMPI_Type_size_x(t, &i.size) != MPI_SUCCESS) return i;
  if (PMPI_Type_get_extent(t, &lb, &i.extent) != MPI_SUCCESS) return i;
  if (PMPI_Type_get_true_extent(t, &i.true_lb, &i.true_extent) != MPI_SUCCESS) return i;
  i.dense = i.size == i.extent && i.true_extent == i.extent && i.true_lb == 0 && lb == 0;
  i.ok = i.size > 0 && i.extent > 0 && i.true_extent > 0;
  return i;
}

MPI_Comm private_self() {
  static std::once_flag once;
  static MPI_Comm self = MPI_COMM_NULL;
  std::call_once(once, [] {
    PMPI_Comm_dup(MPI_COMM_SELF, &self);
    core::add_finalize_hook([] {
      if (self != MPI_COMM_NULL) PMPI_Comm_free(&self);
    });
  });
  return self;
}

int typed_copy(const void* src, void* dst, int64_t n, const TypeInfo& t) {
  if (n <= 0) return MPI_SUCCESS;
  if (t.dense) {
    std::memcpy(dst, src, static_cast<size_t>(n * t.size));
    return MPI_SUCCESS;
  }
  if (n > INT_MAX) return MPI_ERR_COUNT;
  const int c = static_cast<int>(n);
  return PMPI_Sendrecv(src, c, t.type, 0, 0, dst, c, t.type, 0, 0, private_self(), MPI_STATUS_IGNORE);
}

namespace {

// Dense types are plain bytes; others go through the MPI's own pack engine on private_self().
int convert(const void* src, int64_t n, const TypeInfo& t, void* dst, bool packing) {
  if (n <= 0) return MPI_SUCCESS;
  const int64_t bytes = n * t.size;
  if (t.dense) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return MPI_SUCCESS;
  }
  if (n > INT_MAX || bytes > INT_MAX) return MPI_ERR_COUNT;
  int pos = 0;
  const int c = static_cast<int>(n), b = static_cast<int>(bytes);
  return packing ? PMPI_Pack(src, c, t.type, dst, b, &pos, private_self())
                 : PMPI_Unpack(src, b, &pos, dst, c, t.type, private_self());
}

}  // namespace

int pack(const void* src, int64_t n, const TypeInfo& t, void* dst) { return convert(src, n, t, dst, true); }
int unpack(const void* src, int64_t n, const TypeInfo& t, void* dst) { return convert(src, n, t, dst, false); }

}  // namespace hier::exec
