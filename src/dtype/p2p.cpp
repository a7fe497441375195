#include "dtype/p2p.hpp"

#include <climits>

#include "dtype/cache.hpp"
#include "dtype/engine.hpp"
#include "dtype/planner.hpp"
#include "dtype/requests.hpp"
#include "dtype/staging.hpp"
#include "device/pointer.hpp"
#include "device/stage.hpp"

namespace hier::dtype {
namespace {

// The canonical form when this side of a transfer should be packed by libhier, else null.
// Decides on the attribute's own reference (held while the call runs: the type cannot be freed
// during it) and takes a reference only for a message that is packed, so a message passed to
// the MPI touches no reference count.
CanonRef eligible(MPI_Datatype t, int64_t count, bool sending) {
  if (count <= 0 || count > INT_MAX) return {};
  Canon* c = peek(t);
  if (!c || !c->ok || c->size == 0) return {};
  if (c->dense && (count == 1 || c->contiguous)) return {};  // already contiguous bytes
  if (packed_bytes(count, c->size, INT_MAX) < 0) return {};
  if (!(sending ? plan_pack_send(*c, count) : plan_pack_recv(*c, count))) return {};
  c->retain();
  return CanonRef(c);
}

// Unpacks what a staged receive got: all of it, or when truncated what the MPI itself would
// have left in a derived-type buffer (see truncated_data_lands).
void land(const Canon& c, const Staging& s, int64_t count, void* buf, const MPI_Status& st, int rc) {
  if (const MPI_Count bytes = landed_bytes(st, rc); bytes > 0) unpack_prefix(c, s.p, bytes, count, buf);
}

struct Packed {
  CanonRef c;
  Staging s;
  int bytes = 0;
  explicit operator bool() const { return s.p != nullptr; }
};

// A buffer libhier would pack or unpack with the CPU. Device or managed memory goes to the MPI
// as is (a local choice: the bytes on the wire are the same packed or not).
Packed stage_for(CanonRef c, int64_t count, MPI_Datatype t, const void* buf, const char* what) {
  Packed p;
  if (!c) return p;
  if (const device::MemKind k = device::classify_typed(buf, count, t); k != device::MemKind::Host) {
    device::note_untouched(k, what);
    return p;  // drops the reference eligible() took
  }
  p.bytes = static_cast<int>(count * c->size);
  p.s = stage_acquire(static_cast<size_t>(p.bytes));
  p.c = std::move(c);
  return p;
}

}  // namespace

std::optional<int> send(const void* buf, int64_t count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  progress_detached();
  if (dest == MPI_PROC_NULL) return std::nullopt;
  Packed p = stage_for(eligible(t, count, true), count, t, buf, "send");
  if (!p) return std::nullopt;
  pack(*p.c, buf, count, p.s.p);
  const int rc = PMPI_Send(p.s.p, p.bytes, MPI_BYTE, dest, tag, comm);
  stage_release(p.s);
  return rc;
}

std::optional<int> isend(const void* buf, int64_t count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
                         MPI_Request* req) {
  progress_detached();
  if (dest == MPI_PROC_NULL) return std::nullopt;
  Packed p = stage_for(eligible(t, count, true), count, t, buf, "isend");
  if (!p) return std::nullopt;
  pack(*p.c, buf, count, p.s.p);
  const int rc = PMPI_Isend(p.s.p, p.bytes, MPI_BYTE, dest, tag, comm, req);
  if (rc == MPI_SUCCESS) own_send(*req, p.s);
  else stage_release(p.s);
  return rc;
}

std::optional<int> recv(void* buf, int64_t count, MPI_Datatype t, int source, int tag, MPI_Comm comm,
                        MPI_Status* status) {
  progress_detached();
  if (source == MPI_PROC_NULL) return std::nullopt;
  Packed p = stage_for(eligible(t, count, false), count, t, buf, "recv");
  if (!p) return std::nullopt;
  // The user's status goes to the MPI as is: exactly the fields the MPI sets are set.
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = PMPI_Recv(p.s.p, p.bytes, MPI_BYTE, source, tag, comm, st);
  land(*p.c, p.s, count, buf, *st, rc);
  stage_release(p.s);
  return rc;
}

std::optional<int> irecv(void* buf, int64_t count, MPI_Datatype t, int source, int tag, MPI_Comm comm,
                         MPI_Request* req) {
  progress_detached();
  if (source == MPI_PROC_NULL) return std::nullopt;
  Packed p = stage_for(eligible(t, count, false), count, t, buf, "irecv");
  if (!p) return std::nullopt;
  const int rc = PMPI_Irecv(p.s.p, p.bytes, MPI_BYTE, source, tag, comm, req);
  if (rc == MPI_SUCCESS) own_recv(*req, p.s, std::move(p.c), buf, count);
  else stage_release(p.s);
  return rc;
}

std::optional<int> sendrecv(const void* sbuf, int64_t scount, MPI_Datatype stype, int dest, int stag, void* rbuf,
                            int64_t rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm,
                            MPI_Status* status) {
  progress_detached();
  if (scount > INT_MAX || rcount > INT_MAX) return std::nullopt;
  Packed ps = stage_for(dest == MPI_PROC_NULL ? CanonRef{} : eligible(stype, scount, true), scount, stype, sbuf, "sendrecv");
  Packed pr = stage_for(source == MPI_PROC_NULL ? CanonRef{} : eligible(rtype, rcount, false), rcount, rtype, rbuf, "sendrecv");
  if (!ps && !pr) {
    stage_release(ps.s);
    stage_release(pr.s);
    return std::nullopt;
  }
  if (ps) pack(*ps.c, sbuf, scount, ps.s.p);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = PMPI_Sendrecv(ps ? ps.s.p : sbuf, ps ? ps.bytes : static_cast<int>(scount), ps ? MPI_BYTE : stype,
                               dest, stag, pr ? pr.s.p : rbuf, pr ? pr.bytes : static_cast<int>(rcount),
                               pr ? MPI_BYTE : rtype, source, rtag, comm, st);
  if (pr) land(*pr.c, pr.s, rcount, rbuf, *st, rc);
  stage_release(ps.s);
  stage_release(pr.s);
  return rc;
}

}  // namespace hier::dtype
