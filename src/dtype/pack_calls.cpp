#include "dtype/pack_calls.hpp"

#include "dtype/cache.hpp"
#include "dtype/engine.hpp"
#include "dtype/planner.hpp"
#include "device/pointer.hpp"
#include "device/stage.hpp"

namespace hier::dtype {

namespace {
// Both buffers in host memory, else the call goes to the MPI (counted for the report): the typed
// one (n elements of t) and the packed one.
bool host_side(const void* typed, int64_t n, MPI_Datatype t, const void* packed, const char* what) {
  const device::MemKind k = device::worst(device::classify_typed(typed, n, t), device::classify(packed));
  device::note_untouched(k, what);
  return k == device::MemKind::Host;
}
}  // namespace

std::optional<int> pack_call(const void* inbuf, int64_t incount, MPI_Datatype t, void* outbuf, int64_t outsize,
                             int64_t& position, MPI_Comm comm, int64_t limit) {
  if (comm == MPI_COMM_NULL || incount < 0 || position < 0 || outsize < 0) return std::nullopt;
  if (null_rejected(inbuf) || null_rejected(outbuf)) return std::nullopt;
  CanonRef c = lookup(t);
  if (!c || !c->ok) return std::nullopt;
  const int64_t need = packed_bytes(incount, c->size);
  if (need < 0 || outsize - position < need || need > limit - position) return std::nullopt;
  if (!plan_engine_pack(*c, incount)) return std::nullopt;
  if (!host_side(inbuf, incount, t, outbuf, "pack")) return std::nullopt;
  pack(*c, inbuf, incount, static_cast<char*>(outbuf) + position);
  position += need;
  return MPI_SUCCESS;
}

std::optional<int> unpack_call(const void* inbuf, int64_t insize, int64_t& position, void* outbuf, int64_t outcount,
                               MPI_Datatype t, MPI_Comm comm, int64_t limit) {
  if (comm == MPI_COMM_NULL || outcount < 0 || position < 0 || insize < 0) return std::nullopt;
  if (null_rejected(inbuf) || null_rejected(outbuf)) return std::nullopt;
  CanonRef c = lookup(t);
  if (!c || !c->ok) return std::nullopt;
  const int64_t need = packed_bytes(outcount, c->size);
  if (need < 0 || insize - position < need || need > limit - position) return std::nullopt;
  if (!plan_engine_unpack(*c, outcount)) return std::nullopt;
  if (!host_side(outbuf, outcount, t, inbuf, "unpack")) return std::nullopt;
  unpack(*c, static_cast<const char*>(inbuf) + position, outcount, outbuf);
  position += need;
  return MPI_SUCCESS;
}

std::optional<int> pack_size_call(int64_t incount, MPI_Datatype t, MPI_Comm comm, int64_t& size, int64_t limit) {
  if (comm == MPI_COMM_NULL || incount < 0) return std::nullopt;
  CanonRef c = lookup(t);
  if (!c || !c->ok) return std::nullopt;
  const int64_t need = packed_bytes(incount, c->size, limit);
  if (need < 0) return std::nullopt;
  size = need;
  return MPI_SUCCESS;
}

}  // namespace hier::dtype
