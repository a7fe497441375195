// The one dispatch point of the p2p family: point-to-point calls (packing of non-contiguous datatypes plugs in here).
// Every generated wrapper of the family calls dispatch_p2p<Fn::X>(fwd, args...), where fwd()
// forwards the call to PMPI unchanged. Features add behaviour here, for the functions they
// handle, and return passthrough(fwd) for everything they cannot do exactly.
#pragma once

#include <optional>

#include "core/wrap.hpp"
#include "dtype/p2p.hpp"
#include "dtype/requests.hpp"
#include "exec/request.hpp"

namespace hier::core {

namespace p2p_detail {

// int and MPI_Count (_c) variants alike: counts are widened; dtype/p2p passes anything beyond
// INT_MAX through.
template <class N>
std::optional<int> send(const void* buf, N count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  return dtype::send(buf, count, t, dest, tag, comm);
}
template <class N>
std::optional<int> isend(const void* buf, N count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request* r) {
  return dtype::isend(buf, count, t, dest, tag, comm, r);
}
template <class N>
std::optional<int> recv(void* buf, N count, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Status* st) {
  return dtype::recv(buf, count, t, source, tag, comm, st);
}
template <class N>
std::optional<int> irecv(void* buf, N count, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Request* r) {
  return dtype::irecv(buf, count, t, source, tag, comm, r);
}
template <class N>
std::optional<int> sendrecv(const void* sbuf, N scount, MPI_Datatype stype, int dest, int stag, void* rbuf, N rcount,
                            MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status* st) {
  return dtype::sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, st);
}

}  // namespace p2p_detail

template <Fn F, class Fwd, class... Args>
inline Outcome dispatch_p2p(Fwd& fwd, Args... args) {
  constexpr Fn B = base_of(F);
  exec::progress();  // libhier's nonblocking collectives advance in point-to-point calls too
  std::optional<int> rc;
  if constexpr (B == Fn::Send) rc = p2p_detail::send(args...);
  else if constexpr (B == Fn::Isend) rc = p2p_detail::isend(args...);
  else if constexpr (B == Fn::Recv) rc = p2p_detail::recv(args...);
  else if constexpr (B == Fn::Irecv) rc = p2p_detail::irecv(args...);
  else if constexpr (B == Fn::Sendrecv) rc = p2p_detail::sendrecv(args...);
  // MPI_Probe / MPI_Iprobe: statuses count bytes, so they need nothing from libhier.
  if (!rc) return passthrough(fwd);
  return {*rc, diag::AlgoTag::Packed};
}

}  // namespace hier::core
