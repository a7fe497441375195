#include "dtype/signature.hpp"

#include <cstdint>
#include <vector>

#include "dtype/cache.hpp"
#include "dtype/decode.hpp"

namespace hier::dtype {
namespace {

// The signature's element type so far: nothing yet, one type, or more than one (or unknown).
struct Sig {
  enum State : uint8_t { Empty, One, Mixed } state = Empty;
  MPI_Datatype t = MPI_DATATYPE_NULL;
};

void merge(Sig& a, const Sig& b) {
  if (b.state == Sig::Empty || a.state == Sig::Mixed) return;
  if (b.state == Sig::Mixed || (a.state == Sig::One && a.t != b.t)) {
    a = {Sig::Mixed, MPI_DATATYPE_NULL};
    return;
  }
  a = b;
}

// Frees the derived types get_contents handed out (the standard requires it).
struct Types {
  std::vector<MPI_Datatype> v;
  ~Types() {
    for (MPI_Datatype& t : v)
      if (t != MPI_DATATYPE_NULL && !is_named(t)) PMPI_Type_free(&t);
  }
};

Sig walk(MPI_Datatype t, int depth) {
  if (t == MPI_DATATYPE_NULL || depth > 64) return {Sig::Mixed, MPI_DATATYPE_NULL};
  MPI_Count size = 0;
  if (PMPI_Type_size_x(t, &size) != MPI_SUCCESS) return {Sig::Mixed, MPI_DATATYPE_NULL};
  if (size == 0) return {};
  int combiner = MPI_COMBINER_NAMED;
  // Block lengths of a struct: from the ints (ints[0] = count) or, for a large-count
  // constructor, from the counts (counts[0] = count); both the same layout.
  std::vector<int64_t> lens;
  Types types;
#if MPI_VERSION >= 4
  MPI_Count ni = 0, na = 0, nc = 0, nt = 0;
  if (PMPI_Type_get_envelope_c(t, &ni, &na, &nc, &nt, &combiner) != MPI_SUCCESS) return {Sig::Mixed, MPI_DATATYPE_NULL};
  if (combiner == MPI_COMBINER_NAMED) return {Sig::One, t};
  std::vector<int> ints(static_cast<size_t>(ni));
  std::vector<MPI_Aint> aints(static_cast<size_t>(na));
  std::vector<MPI_Count> counts(static_cast<size_t>(nc));
  types.v.assign(static_cast<size_t>(nt), MPI_DATATYPE_NULL);
  if (PMPI_Type_get_contents_c(t, ni, na, nc, nt, ints.data(), aints.data(), counts.data(), types.v.data()) !=
      MPI_SUCCESS)
    return {Sig::Mixed, MPI_DATATYPE_NULL};
  if (nc > 0) lens.assign(counts.begin(), counts.end());
  else lens.assign(ints.begin(), ints.end());
#else
  int ni = 0, na = 0, nt = 0;
  if (PMPI_Type_get_envelope(t, &ni, &na, &nt, &combiner) != MPI_SUCCESS) return {Sig::Mixed, MPI_DATATYPE_NULL};
  if (combiner == MPI_COMBINER_NAMED) return {Sig::One, t};
  std::vector<int> ints(static_cast<size_t>(ni));
  std::vector<MPI_Aint> aints(static_cast<size_t>(na));
  types.v.assign(static_cast<size_t>(nt), MPI_DATATYPE_NULL);
  if (PMPI_Type_get_contents(t, ni, na, nt, ints.data(), aints.data(), types.v.data()) != MPI_SUCCESS)
    return {Sig::Mixed, MPI_DATATYPE_NULL};
  lens.assign(ints.begin(), ints.end());
#endif
  switch (combiner) {
    // One inner type, repeated: a non-empty type's signature is made of the inner type's.
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:
    case MPI_COMBINER_CONTIGUOUS:
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR:
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED:
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK:
    case MPI_COMBINER_SUBARRAY:
    case MPI_COMBINER_DARRAY:
      return types.v.empty() ? Sig{Sig::Mixed, MPI_DATATYPE_NULL} : walk(types.v[0], depth + 1);
    case MPI_COMBINER_STRUCT: {
      Sig s;
      const size_t n = types.v.size();
      if (lens.size() < n + 1) return {Sig::Mixed, MPI_DATATYPE_NULL};
      for (size_t k = 0; k < n && s.state != Sig::Mixed; ++k)
        if (lens[k + 1] > 0) merge(s, walk(types.v[k], depth + 1));
      return s;
    }
    default: return {Sig::Mixed, MPI_DATATYPE_NULL};  // Fortran f90 types and the like: not decoded
  }
}

}  // namespace

MPI_Datatype signature_elem_walk(MPI_Datatype t) {
  const Sig s = walk(t, 0);
  return s.state == Sig::One ? s.t : MPI_DATATYPE_NULL;
}

MPI_Datatype signature_elem(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return MPI_DATATYPE_NULL;
  if (is_named(t)) {
    MPI_Count size = 0;
    return PMPI_Type_size_x(t, &size) == MPI_SUCCESS && size > 0 ? t : MPI_DATATYPE_NULL;
  }
  if (const Canon* c = peek(t)) return c->elem;
  return signature_elem_walk(t);
}

}  // namespace hier::dtype
