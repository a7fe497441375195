#include "exec/typed.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include "dtype/cache.hpp"
#include "dtype/engine.hpp"
#include "dtype/planner.hpp"
#include "dtype/staging.hpp"

// Local copies of typed data never communicate: under MPI_THREAD_MULTIPLE a message to oneself
// on a shared communicator can be received by another thread's copy. Non-dense types go through
// libhier's datatype engine (the canonical form cached on the type at commit) where the planner
// prefers it, otherwise through PMPI_Pack / PMPI_Unpack on MPI_COMM_SELF (no traffic; the
// communicator only names the error handler). Both produce the same packed stream, the MPI's own
// format for a homogeneous run, so a copy may pack with one and unpack with the other.
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

namespace {

// Packed bytes per round of a copy, in a buffer on the stack: typed_copy runs inside schedules,
// after the ranks agreed that everything the run needs was acquired (exec/prepare.hpp), so it
// must not allocate (a rank failing there alone would leave its peers waiting). Small enough
// for any thread's stack, large enough that a round's fixed cost does not matter.
constexpr int64_t kCopyChunkBytes = int64_t{16} << 10;

// Address arithmetic as integers: user buffers may be MPI_BOTTOM (null) with absolute
// displacements in the type, where pointer arithmetic on null would be undefined.
const void* at(const void* base, int64_t bytes) {
  return reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(bytes));
}
void* at(void* base, int64_t bytes) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(bytes));
}

// The engine's form of t when it describes t exactly; null for predefined types (no attribute),
// types committed while libhier was not intercepting, and forms the canonicalizer gave up on.
dtype::CanonRef engine_form(const TypeInfo& t) {
  dtype::CanonRef c = dtype::lookup(t.type);
  if (!c || !c->ok || c->size != t.size || c->extent != t.extent) return {};
  return c;
}

// kPack: n elements at `strided` (element e at strided + e * extent) -> n * size packed bytes at
// `packed`; otherwise the reverse.
template <bool kPack>
int convert_run(const dtype::Canon* c, const void* strided, int64_t n, const TypeInfo& t, const void* packed) {
  void* const out = const_cast<void*>(kPack ? packed : strided);
  if (c && (kPack ? dtype::plan_engine_pack(*c, n) : dtype::plan_engine_unpack(*c, n))) {
    if constexpr (kPack) dtype::pack(*c, strided, n, out);
    else dtype::unpack(*c, packed, n, out);
    return MPI_SUCCESS;
  }
  // PMPI_Pack / PMPI_Unpack count in int: as many rounds as that needs.
  const int64_t per = std::max<int64_t>(1, std::min<int64_t>(INT_MAX, INT_MAX / t.size));
  for (int64_t first = 0; first < n; first += per) {
    const int64_t m = std::min(per, n - first);
    if (m * t.size > INT_MAX) return MPI_ERR_COUNT;
    const void* s = at(strided, first * t.extent);
    const void* p = at(packed, first * t.size);
    const int cm = static_cast<int>(m), bytes = static_cast<int>(m * t.size);
    int pos = 0;
    const int rc = kPack ? PMPI_Pack(s, cm, t.type, const_cast<void*>(p), bytes, &pos, MPI_COMM_SELF)
                         : PMPI_Unpack(p, bytes, &pos, const_cast<void*>(s), cm, t.type, MPI_COMM_SELF);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int pack_run(const dtype::Canon* c, const void* src, int64_t n, const TypeInfo& t, void* dst) {
  return convert_run<true>(c, src, n, t, dst);
}
int unpack_run(const dtype::Canon* c, const void* src, int64_t n, const TypeInfo& t, void* dst) {
  return convert_run<false>(c, dst, n, t, src);
}

}  // namespace

int typed_copy(const void* src, void* dst, int64_t n, const TypeInfo& t) {
  if (n <= 0) return MPI_SUCCESS;
  if (t.dense) {
    std::memcpy(dst, src, static_cast<size_t>(n * t.size));
    return MPI_SUCCESS;
  }
  // Packed into a bounded buffer and unpacked from it, a run of elements at a time. An element
  // larger than the stack buffer (rare) takes a staging buffer instead.
  const dtype::CanonRef c = engine_form(t);
  const int64_t per = std::max<int64_t>(1, kCopyChunkBytes / t.size);
  alignas(64) char local[kCopyChunkBytes];
  dtype::Staging s{local, sizeof local};
  if (t.size > kCopyChunkBytes) {
    s = dtype::stage_acquire(static_cast<size_t>(t.size));
    if (!s.p) return MPI_ERR_NO_MEM;
  }
  int rc = MPI_SUCCESS;
  for (int64_t first = 0; first < n && rc == MPI_SUCCESS; first += per) {
    const int64_t m = std::min(per, n - first);
    rc = pack_run(c.get(), at(src, first * t.extent), m, t, s.p);
    if (rc == MPI_SUCCESS) rc = unpack_run(c.get(), s.p, m, t, at(dst, first * t.extent));
  }
  if (s.p != local) dtype::stage_release(s);
  return rc;
}

int pack(const void* src, int64_t n, const TypeInfo& t, void* dst) {
  if (n <= 0) return MPI_SUCCESS;
  if (t.dense) {
    std::memcpy(dst, src, static_cast<size_t>(n * t.size));
    return MPI_SUCCESS;
  }
  return pack_run(engine_form(t).get(), src, n, t, dst);
}

int unpack(const void* src, int64_t n, const TypeInfo& t, void* dst) {
  if (n <= 0) return MPI_SUCCESS;
  if (t.dense) {
    std::memcpy(dst, src, static_cast<size_t>(n * t.size));
    return MPI_SUCCESS;
  }
  return unpack_run(engine_form(t).get(), src, n, t, dst);
}

}  // namespace hier::exec
