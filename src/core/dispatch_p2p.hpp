// The one dispatch point of the p2p family: point-to-point calls (packing of non-contiguous datatypes plugs in here).
// Every generated wrapper of the family calls dispatch_p2p<Fn::X>(fwd, args...), where fwd()
// forwards the call to PMPI unchanged. Features add behaviour here, for the functions they
// handle, and return passthrough(fwd) for everything they cannot do exactly.
#pragma once

#include <sched.h>

#include <memory>
#include <optional>
#include <type_traits>

#include "core/device_p2p.hpp"
#include "core/dispatch_request.hpp"
#include "core/wrap.hpp"
#include "device/module.hpp"
#include "device/pointer.hpp"
#include "device/stage.hpp"
#include "dtype/device_p2p.hpp"
#include "dtype/p2p.hpp"
#include "dtype/requests.hpp"
#include "exec/request.hpp"
#include "util/inject.hpp"

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

// While libhier's nonblocking collectives are outstanding and no progress thread advances them,
// the blocking calls become their nonblocking form completed in a loop that advances them
// (MPI defines MPI_Send as MPI_Isend + MPI_Wait, and so on): a rank blocked in MPI_Recv until a
// peer's MPI_Wait on a collective returns must still issue its own next level steps for it, as
// the MPI alone would progress its own collective there (docs/nonblocking.md, "Progress").
//
// The nonblocking form itself: dtype/p2p's packed call when the datatype needs it (`packed`),
// else PMPI's: `plain` for int counts, `large` (its MPI 4 _c form) for MPI_Count. peer: the
// destination or the source.
template <class Packed, class Plain, class Large, class Buf, class N>
int start_nonblocking(Packed packed, Plain plain, [[maybe_unused]] Large large, Buf buf, N count, MPI_Datatype t,
                      int peer, int tag, MPI_Comm comm, MPI_Request* r) {
  if (auto rc = packed(buf, count, t, peer, tag, comm, r)) return *rc;
  if constexpr (std::is_same_v<N, int>) return plain(buf, count, t, peer, tag, comm, r);
  else return large(buf, count, t, peer, tag, comm, r);
}
#if MPI_VERSION >= 4
inline constexpr auto kPmpiIsendLarge = PMPI_Isend_c;
inline constexpr auto kPmpiIrecvLarge = PMPI_Irecv_c;
#else  // before MPI 4 no call has MPI_Count counts: never used
inline constexpr auto kPmpiIsendLarge = PMPI_Isend;
inline constexpr auto kPmpiIrecvLarge = PMPI_Irecv;
#endif
template <class N>
int isend_any(const void* buf, N count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request* r) {
  return start_nonblocking(isend<N>, PMPI_Isend, kPmpiIsendLarge, buf, count, t, dest, tag, comm, r);
}
template <class N>
int irecv_any(void* buf, N count, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Request* r) {
  return start_nonblocking(irecv<N>, PMPI_Irecv, kPmpiIrecvLarge, buf, count, t, source, tag, comm, r);
}
template <class N>
int send_progressing(const void* buf, N count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  if (int rc = isend_any(buf, count, t, dest, tag, comm, &r); rc != MPI_SUCCESS) return rc;
  return request_detail::complete_progressing(1, &r, MPI_STATUS_IGNORE);
}
template <class N>
int recv_progressing(void* buf, N count, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Status* st) {
  MPI_Request r = MPI_REQUEST_NULL;
  if (int rc = irecv_any(buf, count, t, source, tag, comm, &r); rc != MPI_SUCCESS) return rc;
  return request_detail::complete_progressing(1, &r, st);
}
template <class N>
int sendrecv_progressing(const void* sbuf, N scount, MPI_Datatype stype, int dest, int stag, void* rbuf, N rcount,
                         MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status* st) {
  MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  if (int rc = irecv_any(rbuf, rcount, rtype, source, rtag, comm, &r[0]); rc != MPI_SUCCESS) return rc;
  if (int rc = isend_any(sbuf, scount, stype, dest, stag, comm, &r[1]); rc != MPI_SUCCESS) {
    PMPI_Cancel(&r[0]);
    PMPI_Wait(&r[0], MPI_STATUS_IGNORE);
    return rc;
  }
  MPI_Status sts[2];
  int rc = request_detail::complete_progressing(2, r, sts);
  if (rc == MPI_ERR_IN_STATUS) rc = sts[0].MPI_ERROR != MPI_SUCCESS ? sts[0].MPI_ERROR : sts[1].MPI_ERROR;
  if (st != MPI_STATUS_IGNORE) *st = sts[0];
  return rc;
}
// MPI_Sendrecv_replace: the outgoing data packed into a copy first (the receive overwrites the
// buffer), then both sides as MPI_Sendrecv's; MPI_PACKED matches the peer's type like the
// elements it holds. No memory for the copy, device memory, or a packed size beyond an int: the
// MPI's own call (which then cannot advance libhier's requests, as before).
template <class N>
int sendrecv_replace_progressing(void* buf, N count, MPI_Datatype t, int dest, int stag, int source, int rtag,
                                 MPI_Comm comm, MPI_Status* st) {
  int bytes = 0;
  if constexpr (std::is_same_v<N, int>) {
    // Host memory only (MPI_Pack of device memory is the MPI's own business), and a size that
    // fits MPI_Pack's int: otherwise the MPI's own call, as before.
    const bool host = device::runtime() == device::Runtime::None ||
                      device::classify_typed(buf, count, t) == device::MemKind::Host;  // its first touched byte
    std::unique_ptr<char[]> copy;
    if (host && PMPI_Pack_size(count, t, comm, &bytes) == MPI_SUCCESS && bytes >= 0)
      copy.reset(new (std::nothrow) char[bytes > 0 ? bytes : 1]);
    if (copy) {
      int used = 0;
      if (int rc = PMPI_Pack(buf, count, t, copy.get(), bytes, &used, comm); rc != MPI_SUCCESS) return rc;
      return sendrecv_progressing(static_cast<const void*>(copy.get()), used, MPI_PACKED, dest, stag, buf, count, t,
                                  source, rtag, comm, st);
    }
    return PMPI_Sendrecv_replace(buf, count, t, dest, stag, source, rtag, comm, st);
  } else {  // the _c form (MPI 4): its count may not fit MPI_Pack's int
    return PMPI_Sendrecv_replace_c(buf, count, t, dest, stag, source, rtag, comm, st);
  }
}
// MPI_Probe: MPI_Iprobe until a message matches.
inline int probe_progressing(int source, int tag, MPI_Comm comm, MPI_Status* st) {
  while (exec::calls_must_progress()) {
    exec::progress();
    int flag = 0;
    if (int rc = PMPI_Iprobe(source, tag, comm, &flag, st); rc != MPI_SUCCESS || flag) return rc;
    sched_yield();
  }
  return PMPI_Probe(source, tag, comm, st);
}

}  // namespace p2p_detail

template <Fn F, class Fwd, class... Args>
Outcome dispatch_p2p(Fwd& fwd, Args... args);

namespace p2p_detail {
// The PMPI call of each form, by the type of its counts: int, or MPI_Count (the MPI 4 _c forms).
namespace pmpi {
inline int send(const void* b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c) { return PMPI_Send(b, n, t, d, tag, c); }
inline int recv(void* b, int n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Status* st) {
  return PMPI_Recv(b, n, t, s, tag, c, st);
}
inline int sendrecv(const void* sb, int sn, MPI_Datatype stype, int d, int stag, void* rb, int rn, MPI_Datatype rtype, int s,
                    int rtag, MPI_Comm c, MPI_Status* st) {
  return PMPI_Sendrecv(sb, sn, stype, d, stag, rb, rn, rtype, s, rtag, c, st);
}
inline int replace(void* b, int n, MPI_Datatype t, int d, int stag, int s, int rtag, MPI_Comm c, MPI_Status* st) {
  return PMPI_Sendrecv_replace(b, n, t, d, stag, s, rtag, c, st);
}
inline int isend(const void* b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c, MPI_Request* r) {
  return PMPI_Isend(b, n, t, d, tag, c, r);
}
inline int irecv(void* b, int n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Request* r) {
  return PMPI_Irecv(b, n, t, s, tag, c, r);
}
#if MPI_VERSION >= 4
inline int send(const void* b, MPI_Count n, MPI_Datatype t, int d, int tag, MPI_Comm c) {
  return PMPI_Send_c(b, n, t, d, tag, c);
}
inline int recv(void* b, MPI_Count n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Status* st) {
  return PMPI_Recv_c(b, n, t, s, tag, c, st);
}
inline int sendrecv(const void* sb, MPI_Count sn, MPI_Datatype stype, int d, int stag, void* rb, MPI_Count rn,
                    MPI_Datatype rtype, int s, int rtag, MPI_Comm c, MPI_Status* st) {
  return PMPI_Sendrecv_c(sb, sn, stype, d, stag, rb, rn, rtype, s, rtag, c, st);
}
inline int replace(void* b, MPI_Count n, MPI_Datatype t, int d, int stag, int s, int rtag, MPI_Comm c, MPI_Status* st) {
  return PMPI_Sendrecv_replace_c(b, n, t, d, stag, s, rtag, c, st);
}
inline int isend(const void* b, MPI_Count n, MPI_Datatype t, int d, int tag, MPI_Comm c, MPI_Request* r) {
  return PMPI_Isend_c(b, n, t, d, tag, c, r);
}
inline int irecv(void* b, MPI_Count n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Request* r) {
  return PMPI_Irecv_c(b, n, t, s, tag, c, r);
}
#endif
}  // namespace pmpi

// The report's name of a path for call F: `base`, with "_c" for the large-count forms.
template <Fn F>
constexpr const char* path_name(const char* base, const char* large) {
  return F == base_of(F) ? base : large;
}

// The blocking calls with device buffers on an MPI that is not GPU-aware (core/device_p2p.hpp):
// the same dispatch again, on host copies; int and _c forms alike. nullopt: no buffer to stage.
template <Fn F, class N>
  requires(base_of(F) == Fn::Send)
std::optional<Outcome> on_host(device_p2p::Call<F>, const void* b, N n, MPI_Datatype t, int d, int tag, MPI_Comm c) {
  device_p2p::Side in(b, n, t);
  return device_p2p::run(path_name<F>("staged_send", "staged_send_c"), in, nullptr, [&] {
    const void* h = in.ptr();
    auto fwd = [&] { return pmpi::send(h, n, t, d, tag, c); };
    return dispatch_p2p<F>(fwd, h, n, t, d, tag, c);
  });
}
template <Fn F, class N>
  requires(base_of(F) == Fn::Recv)
std::optional<Outcome> on_host(device_p2p::Call<F>, void* b, N n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Status* st) {
  device_p2p::Side none(nullptr, 0, t), out(b, n, t);
  return device_p2p::run(path_name<F>("staged_recv", "staged_recv_c"), none, &out, [&] {
    void* h = out.ptr();
    auto fwd = [&] { return pmpi::recv(h, n, t, s, tag, c, st); };
    return dispatch_p2p<F>(fwd, h, n, t, s, tag, c, st);
  });
}
template <Fn F, class N>
  requires(base_of(F) == Fn::Sendrecv)
std::optional<Outcome> on_host(device_p2p::Call<F>, const void* sb, N sn, MPI_Datatype stype, int d, int stag, void* rb, N rn,
                               MPI_Datatype rtype, int s, int rtag, MPI_Comm c, MPI_Status* st) {
  device_p2p::Side in(sb, sn, stype), out(rb, rn, rtype);
  return device_p2p::run(path_name<F>("staged_sendrecv", "staged_sendrecv_c"), in, &out, [&] {
    const void* hs = in.ptr();
    void* hr = out.ptr();
    auto fwd = [&] { return pmpi::sendrecv(hs, sn, stype, d, stag, hr, rn, rtype, s, rtag, c, st); };
    return dispatch_p2p<F>(fwd, hs, sn, stype, d, stag, hr, rn, rtype, s, rtag, c, st);
  });
}
template <Fn F, class N>
  requires(base_of(F) == Fn::Sendrecv_replace)
std::optional<Outcome> on_host(device_p2p::Call<F>, void* b, N n, MPI_Datatype t, int d, int stag, int s, int rtag, MPI_Comm c,
                               MPI_Status* st) {
  device_p2p::Side io(b, n, t);  // sent from, received into, copied back
  return device_p2p::run(path_name<F>("staged_sendrecv_replace", "staged_sendrecv_replace_c"), io, &io, [&] {
    void* h = io.ptr();
    auto fwd = [&] { return pmpi::replace(h, n, t, d, stag, s, rtag, c, st); };
    return dispatch_p2p<F>(fwd, h, n, t, d, stag, s, rtag, c, st);
  });
}
template <Fn F, class N>
  requires(base_of(F) == Fn::Isend)
std::optional<Outcome> on_host(device_p2p::Call<F>, const void* b, N n, MPI_Datatype t, int d, int tag, MPI_Comm c,
                               MPI_Request* r) {
  return device_p2p::start_staged(b, n, t, r, false, path_name<F>("staged_isend", "staged_isend_c"),
                                  [&](void* h) { return pmpi::isend(h, n, t, d, tag, c, r); });
}
template <Fn F, class N>
  requires(base_of(F) == Fn::Irecv)
std::optional<Outcome> on_host(device_p2p::Call<F>, void* b, N n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Request* r) {
  return device_p2p::start_staged(b, n, t, r, true, path_name<F>("staged_irecv", "staged_irecv_c"),
                                  [&](void* h) { return pmpi::irecv(h, n, t, s, tag, c, r); });
}

// Non-contiguous messages of device memory, packed and unpacked by the GPU module's kernels
// (dtype/device_p2p.hpp), on a GPU-aware MPI or not: the packed bytes go through this same
// dispatch as MPI_BYTE (so the progress rules above apply). nullopt: not a case the kernels take.
inline const device::ModuleTable* kernels() {
  if (device::runtime() == device::Runtime::None) return nullptr;  // one load without a runtime
  return device::module(config::get().gpu_module.c_str());
}
template <class Send>
std::optional<Outcome> send_packed(const void* b, int64_t n, MPI_Datatype t, int peer, const char* what, Send send) {
  const device::ModuleTable* m = peer == MPI_PROC_NULL ? nullptr : kernels();
  if (!m) return std::nullopt;
  dtype::DeviceMessage msg = dtype::device_message(*m, b, n, t, true);
  if (!msg) return std::nullopt;
  device::note_untouched(device::MemKind::Device, what);
  const int rc = send(msg);  // takes the staging buffer when it keeps it (MPI_Isend)
  dtype::device_release(msg);
  return Outcome{rc, diag::AlgoTag::Packed};
}
// The int and the large-count (_c) forms share one body each: n elements whose packed bytes fit
// in an int (dtype::device_message takes no others), so the packed message itself always goes
// through the int form of the call. The report counts the _c forms under their own names.
template <class N>
std::optional<Outcome> send_kernels(const char* what, const void* b, N n, MPI_Datatype t, int d, int tag, MPI_Comm c) {
  return send_packed(b, n, t, d, what, [&](dtype::DeviceMessage& msg) {
    const void* p = msg.stage.p;
    auto fwd = [&] { return PMPI_Send(p, msg.bytes, MPI_BYTE, d, tag, c); };
    return dispatch_p2p<Fn::Send>(fwd, p, msg.bytes, MPI_BYTE, d, tag, c).rc;
  });
}
template <class N>
std::optional<Outcome> isend_kernels(const char* what, const void* b, N n, MPI_Datatype t, int d, int tag, MPI_Comm c,
                                     MPI_Request* r) {
  return send_packed(b, n, t, d, what, [&](dtype::DeviceMessage& msg) {
    const void* p = msg.stage.p;
    auto fwd = [&] { return PMPI_Isend(p, msg.bytes, MPI_BYTE, d, tag, c, r); };
    const int rc = dispatch_p2p<Fn::Isend>(fwd, p, msg.bytes, MPI_BYTE, d, tag, c, r).rc;
    if (rc == MPI_SUCCESS) {
      dtype::own_send(*r, msg.stage);  // released when the request completes
      msg.stage = {};
    }
    return rc;
  });
}
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Send>, const void* b, int n, MPI_Datatype t, int d, int tag,
                                        MPI_Comm c) {
  return send_kernels("kernel_send", b, n, t, d, tag, c);
}
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Isend>, const void* b, int n, MPI_Datatype t, int d, int tag,
                                        MPI_Comm c, MPI_Request* r) {
  return isend_kernels("kernel_isend", b, n, t, d, tag, c, r);
}
// The receive side: `recv(msg)` posts the receive of the packed bytes and lands them (or has
// them landed at completion), returning the call's code.
template <class Recv>
std::optional<Outcome> recv_packed(void* b, int64_t n, MPI_Datatype t, int peer, const char* what, Recv recv) {
  const device::ModuleTable* m = peer == MPI_PROC_NULL ? nullptr : kernels();
  if (!m) return std::nullopt;
  dtype::DeviceMessage msg = dtype::device_message(*m, b, n, t, false);
  if (!msg) return std::nullopt;
  device::note_untouched(device::MemKind::Device, what);
  return Outcome{recv(msg), diag::AlgoTag::Packed};
}
template <class N>
std::optional<Outcome> recv_kernels(const char* what, void* b, N n, MPI_Datatype t, int s, int tag, MPI_Comm c,
                                    MPI_Status* st) {
  return recv_packed(b, n, t, s, what, [&](dtype::DeviceMessage& msg) {
    MPI_Status local;
    MPI_Status* sp = st == MPI_STATUS_IGNORE ? &local : st;  // landing needs the byte count
    void* p = msg.stage.p;
    auto fwd = [&] { return PMPI_Recv(p, msg.bytes, MPI_BYTE, s, tag, c, sp); };
    const int rc = dispatch_p2p<Fn::Recv>(fwd, p, msg.bytes, MPI_BYTE, s, tag, c, sp).rc;
    dtype::device_land(msg, n, b, *sp, rc);
    return rc;
  });
}
template <class N>
std::optional<Outcome> irecv_kernels(const char* what, void* b, N n, MPI_Datatype t, int s, int tag, MPI_Comm c,
                                     MPI_Request* r) {
  return recv_packed(b, n, t, s, what, [&](dtype::DeviceMessage& msg) {
    void* p = msg.stage.p;
    auto fwd = [&] { return PMPI_Irecv(p, msg.bytes, MPI_BYTE, s, tag, c, r); };
    const int rc = dispatch_p2p<Fn::Irecv>(fwd, p, msg.bytes, MPI_BYTE, s, tag, c, r).rc;
    if (rc == MPI_SUCCESS) dtype::own_device_message(*r, std::move(msg), b, n);  // unpacked at completion
    else dtype::device_release(msg);
    return rc;
  });
}
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Recv>, void* b, int n, MPI_Datatype t, int s, int tag,
                                        MPI_Comm c, MPI_Status* st) {
  return recv_kernels("kernel_recv", b, n, t, s, tag, c, st);
}
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Irecv>, void* b, int n, MPI_Datatype t, int s, int tag,
                                        MPI_Comm c, MPI_Request* r) {
  return irecv_kernels("kernel_irecv", b, n, t, s, tag, c, r);
}

// MPI_Sendrecv: either side or both packed by the kernels; the call then goes on (the same
// dispatch again) with MPI_BYTE on the packed sides, so a side the kernels do not take is still
// staged or passed as it would be alone. MPI_Sendrecv_replace: both sides packed (the send from
// the buffer before the receive lands in it), as one MPI_Sendrecv between two staging buffers.
template <class N>
std::optional<Outcome> sendrecv_kernels(const char* what, const void* sb, N sn, MPI_Datatype stype, int d, int stag,
                                        void* rb, N rn, MPI_Datatype rtype, int s, int rtag, MPI_Comm c,
                                        MPI_Status* st) {
  const device::ModuleTable* m = kernels();
  if (!m) return std::nullopt;
  dtype::DeviceMessage out = d == MPI_PROC_NULL ? dtype::DeviceMessage{} : dtype::device_message(*m, sb, sn, stype, true);
  dtype::DeviceMessage in = s == MPI_PROC_NULL ? dtype::DeviceMessage{} : dtype::device_message(*m, rb, rn, rtype, false);
  if (!out && !in) return std::nullopt;
  device::note_untouched(device::MemKind::Device, what);
  MPI_Status local;
  MPI_Status* sp = st == MPI_STATUS_IGNORE ? &local : st;  // landing needs the byte count
  const void* sb2 = out ? out.stage.p : sb;
  void* rb2 = in ? in.stage.p : rb;
  const N sn2 = out ? static_cast<N>(out.bytes) : sn, rn2 = in ? static_cast<N>(in.bytes) : rn;
  const MPI_Datatype st2 = out ? MPI_BYTE : stype, rt2 = in ? MPI_BYTE : rtype;
  int rc = MPI_SUCCESS;
  if constexpr (std::is_same_v<N, int>) {
    auto fwd = [&] { return PMPI_Sendrecv(sb2, sn2, st2, d, stag, rb2, rn2, rt2, s, rtag, c, sp); };
    rc = dispatch_p2p<Fn::Sendrecv>(fwd, sb2, sn2, st2, d, stag, rb2, rn2, rt2, s, rtag, c, sp).rc;
  } else {
#if MPI_VERSION >= 4
    auto fwd = [&] { return PMPI_Sendrecv_c(sb2, sn2, st2, d, stag, rb2, rn2, rt2, s, rtag, c, sp); };
    rc = dispatch_p2p<Fn::Sendrecv_c>(fwd, sb2, sn2, st2, d, stag, rb2, rn2, rt2, s, rtag, c, sp).rc;
#endif
  }
  if (in) dtype::device_land(in, rn, rb, *sp, rc);
  dtype::device_release(out);
  return Outcome{rc, diag::AlgoTag::Packed};
}
template <class N>
std::optional<Outcome> replace_kernels(const char* what, void* b, N n, MPI_Datatype t, int d, int stag, int s, int rtag,
                                       MPI_Comm c, MPI_Status* st) {
  const device::ModuleTable* m = d == MPI_PROC_NULL || s == MPI_PROC_NULL ? nullptr : kernels();
  if (!m) return std::nullopt;
  dtype::DeviceMessage out = dtype::device_message(*m, b, n, t, true);
  if (!out) return std::nullopt;
  dtype::DeviceMessage in = dtype::device_message(*m, b, n, t, false);
  if (!in) {
    dtype::device_release(out);
    return std::nullopt;
  }
  device::note_untouched(device::MemKind::Device, what);
  MPI_Status local;
  MPI_Status* sp = st == MPI_STATUS_IGNORE ? &local : st;
  const void* sb = out.stage.p;
  void* rb = in.stage.p;
  auto fwd = [&] { return PMPI_Sendrecv(sb, out.bytes, MPI_BYTE, d, stag, rb, in.bytes, MPI_BYTE, s, rtag, c, sp); };
  const int rc = dispatch_p2p<Fn::Sendrecv>(fwd, sb, out.bytes, MPI_BYTE, d, stag, rb, in.bytes, MPI_BYTE, s, rtag, c, sp).rc;
  dtype::device_release(out);
  dtype::device_land(in, n, b, *sp, rc);
  return Outcome{rc, diag::AlgoTag::Packed};
}
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Sendrecv>, const void* sb, int sn, MPI_Datatype stype, int d,
                                        int stag, void* rb, int rn, MPI_Datatype rtype, int s, int rtag, MPI_Comm c,
                                        MPI_Status* st) {
  return sendrecv_kernels("kernel_sendrecv", sb, sn, stype, d, stag, rb, rn, rtype, s, rtag, c, st);
}
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Sendrecv_replace>, void* b, int n, MPI_Datatype t, int d,
                                        int stag, int s, int rtag, MPI_Comm c, MPI_Status* st) {
  return replace_kernels("kernel_sendrecv_replace", b, n, t, d, stag, s, rtag, c, st);
}
#if MPI_VERSION >= 4
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Send_c>, const void* b, MPI_Count n, MPI_Datatype t, int d,
                                        int tag, MPI_Comm c) {
  return send_kernels("kernel_send_c", b, n, t, d, tag, c);
}
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Isend_c>, const void* b, MPI_Count n, MPI_Datatype t, int d,
                                        int tag, MPI_Comm c, MPI_Request* r) {
  return isend_kernels("kernel_isend_c", b, n, t, d, tag, c, r);
}
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Recv_c>, void* b, MPI_Count n, MPI_Datatype t, int s, int tag,
                                        MPI_Comm c, MPI_Status* st) {
  return recv_kernels("kernel_recv_c", b, n, t, s, tag, c, st);
}
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Irecv_c>, void* b, MPI_Count n, MPI_Datatype t, int s,
                                        int tag, MPI_Comm c, MPI_Request* r) {
  return irecv_kernels("kernel_irecv_c", b, n, t, s, tag, c, r);
}
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Sendrecv_c>, const void* sb, MPI_Count sn, MPI_Datatype stype,
                                        int d, int stag, void* rb, MPI_Count rn, MPI_Datatype rtype, int s, int rtag,
                                        MPI_Comm c, MPI_Status* st) {
  return sendrecv_kernels("kernel_sendrecv_c", sb, sn, stype, d, stag, rb, rn, rtype, s, rtag, c, st);
}
inline std::optional<Outcome> on_device(device_p2p::Call<Fn::Sendrecv_replace_c>, void* b, MPI_Count n, MPI_Datatype t,
                                        int d, int stag, int s, int rtag, MPI_Comm c, MPI_Status* st) {
  return replace_kernels("kernel_sendrecv_replace_c", b, n, t, d, stag, s, rtag, c, st);
}
#endif
template <class... A>
std::optional<Outcome> on_device(A...) {  // the other calls: no kernel path
  return std::nullopt;
}
}  // namespace p2p_detail

template <Fn F, class Fwd, class... Args>
inline Outcome dispatch_p2p(Fwd& fwd, Args... args) {
  constexpr Fn B = base_of(F);
  if constexpr (B == Fn::Send || B == Fn::Recv || B == Fn::Sendrecv || B == Fn::Sendrecv_replace || B == Fn::Isend ||
                B == Fn::Irecv) {
    if (device_p2p::tl_on_host_copies == 0) {  // (not again on libhier's own host copies)
      if (auto o = p2p_detail::on_device(device_p2p::Call<F>{}, args...)) return *o;
      if (auto o = p2p_detail::on_host(device_p2p::Call<F>{}, args...)) return *o;
    }
  }
  exec::progress();  // libhier's nonblocking collectives advance in point-to-point calls too
  if constexpr (B == Fn::Send || B == Fn::Recv || B == Fn::Sendrecv || B == Fn::Sendrecv_replace || B == Fn::Probe) {
    // Test-only "p2p_progress" (util/inject.hpp) removes the loop, to show that the test of it
    // (nonblocking.stall) stalls without it; asked only while requests are outstanding.
    if (exec::calls_must_progress() && !util::injected_failure("p2p_progress")) {
      int rc = MPI_SUCCESS;
      if constexpr (B == Fn::Send) rc = p2p_detail::send_progressing(args...);
      else if constexpr (B == Fn::Recv) rc = p2p_detail::recv_progressing(args...);
      else if constexpr (B == Fn::Sendrecv) rc = p2p_detail::sendrecv_progressing(args...);
      else if constexpr (B == Fn::Sendrecv_replace) rc = p2p_detail::sendrecv_replace_progressing(args...);
      else rc = p2p_detail::probe_progressing(args...);
      return {rc, diag::AlgoTag::Flat};
    }
  }
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
