// The one dispatch point of the dtype family: datatype calls (canonicalization at commit and fast MPI_Pack plug in here).
// Every generated wrapper of the family calls dispatch_dtype<Fn::X>(fwd, args...), where fwd()
// forwards the call to PMPI unchanged. Features add behaviour here, for the functions they
// handle, and return passthrough(fwd) for everything they cannot do exactly.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>

#include "core/device_p2p.hpp"
#include "core/wrap.hpp"
#include "dtype/cache.hpp"
#include "device/module.hpp"
#include "dtype/device_pack.hpp"
#include "dtype/pack_calls.hpp"
#include "exec/request.hpp"
#include "util/inject.hpp"

namespace hier::core {

namespace dtype_detail {

// The int and MPI_Count (_c) variants share one implementation; `limit` keeps the int
// variants from producing positions they cannot represent (those go to the MPI).
template <class N>
constexpr int64_t limit_of() {
  return static_cast<int64_t>(std::numeric_limits<N>::max());
}

inline Outcome done(const std::optional<int>& rc) { return {*rc, diag::AlgoTag::Packed}; }

template <class Fwd, class N>
Outcome pack(Fwd& fwd, const void* inbuf, N incount, MPI_Datatype t, void* outbuf, N outsize, N* position,
             MPI_Comm comm) {
  if (!position) return passthrough(fwd);
  int64_t pos = *position;
  auto rc = dtype::pack_call(inbuf, incount, t, outbuf, outsize, pos, comm, limit_of<N>());
  if (!rc) return passthrough(fwd);
  *position = static_cast<N>(pos);
  return done(rc);
}

template <class Fwd, class N>
Outcome unpack(Fwd& fwd, const void* inbuf, N insize, N* position, void* outbuf, N outcount, MPI_Datatype t,
               MPI_Comm comm) {
  if (!position) return passthrough(fwd);
  int64_t pos = *position;
  auto rc = dtype::unpack_call(inbuf, insize, pos, outbuf, outcount, t, comm, limit_of<N>());
  if (!rc) return passthrough(fwd);
  *position = static_cast<N>(pos);
  return done(rc);
}

template <class Fwd, class N>
Outcome pack_size(Fwd& fwd, N incount, MPI_Datatype t, MPI_Comm comm, N* size) {
  if (!size) return passthrough(fwd);
  int64_t s = 0;
  auto rc = dtype::pack_size_call(incount, t, comm, s, limit_of<N>());
  if (!rc) return passthrough(fwd);
  *size = static_cast<N>(s);
  return done(rc);
}

}  // namespace dtype_detail

template <Fn F, class Fwd, class... Args>
Outcome dispatch_dtype(Fwd& fwd, Args... args);

namespace dtype_detail {
// MPI_Pack / MPI_Unpack whose typed buffer is device memory, by the GPU module's kernels
// (dtype/device_pack.hpp), GPU-aware MPI or not: a GPU-aware MPI would pack device memory by
// its own means (TEMPI measured those as the slow part). nullopt: no module, or not a case it
// takes; the staged path or the MPI then has the call.
template <class Run>
std::optional<Outcome> by_module(int* pos, const char* what, Run run) {
  const device::ModuleTable* m = pos ? device::module(config::get().gpu_module.c_str()) : nullptr;
  if (!m) return std::nullopt;
  int64_t p = *pos;
  const std::optional<int> rc = run(*m, p);
  if (!rc) return std::nullopt;
  device::note_untouched(device::MemKind::Device, what);
  if (*rc == MPI_SUCCESS) *pos = static_cast<int>(p);
  return Outcome{*rc, diag::AlgoTag::Packed};
}
inline std::optional<Outcome> on_device(const void* in, int n, MPI_Datatype t, void* out, int size, int* pos,
                                        MPI_Comm c) {
  return by_module(pos, "kernel_pack", [&](const device::ModuleTable& m, int64_t& p) {
    return dtype::device_pack_call(m, in, n, t, out, size, p, c, limit_of<int>());
  });
}
inline std::optional<Outcome> on_device(const void* in, int size, int* pos, void* out, int n, MPI_Datatype t,
                                        MPI_Comm c) {
  return by_module(pos, "kernel_unpack", [&](const device::ModuleTable& m, int64_t& p) {
    return dtype::device_unpack_call(m, in, size, p, out, n, t, c, limit_of<int>());
  });
}

// MPI_Pack / MPI_Unpack with device buffers on an MPI that is not GPU-aware (core/device_p2p.hpp):
// the same dispatch on host copies of the typed side and of the packed bytes [0, size).
// MPICH rejects a null typed buffer (MPI_BOTTOM) in both calls (dtype::null_rejected): staging
// would hand it a non-null copy and turn that error into a success, so the MPI keeps the call.
inline std::optional<Outcome> on_host(const void* in, int n, MPI_Datatype t, void* out, int size, int* pos,
                                      MPI_Comm c) {
  if (!pos || size < 0 || dtype::null_rejected(in)) return std::nullopt;  // the MPI reports the error
  device_p2p::Side typed(in, n, t), packed(out, size, MPI_BYTE);
  return device_p2p::run("staged_pack", typed, &packed, [&] {
    const void* hi = typed.ptr();
    void* ho = packed.ptr();
    auto fwd = [&] { return PMPI_Pack(hi, n, t, ho, size, pos, c); };
    return dispatch_dtype<Fn::Pack>(fwd, hi, n, t, ho, size, pos, c);
  });
}
inline std::optional<Outcome> on_host(const void* in, int size, int* pos, void* out, int n, MPI_Datatype t,
                                      MPI_Comm c) {
  if (!pos || size < 0 || dtype::null_rejected(out)) return std::nullopt;
  device_p2p::Side packed(in, size, MPI_BYTE), typed(out, n, t);
  return device_p2p::run("staged_unpack", packed, &typed, [&] {
    const void* hi = packed.ptr();
    void* ho = typed.ptr();
    auto fwd = [&] { return PMPI_Unpack(hi, size, pos, ho, n, t, c); };
    return dispatch_dtype<Fn::Unpack>(fwd, hi, size, pos, ho, n, t, c);
  });
}
}  // namespace dtype_detail

template <Fn F, class Fwd, class... Args>
inline Outcome dispatch_dtype(Fwd& fwd, Args... args) {
  constexpr Fn B = base_of(F);
  if constexpr (F == Fn::Pack || F == Fn::Unpack) {
    if (device_p2p::tl_on_host_copies == 0) {  // (not again on libhier's own host copies)
      if (auto o = dtype_detail::on_device(args...)) return *o;
      if (auto o = dtype_detail::on_host(args...)) return *o;
    }
  }
  if constexpr (B == Fn::Type_commit) {
    const Outcome o = passthrough(fwd);
    if (o.rc == MPI_SUCCESS) dtype::on_commit(*std::get<0>(std::tuple<Args...>(args...)));
    return o;
  } else if constexpr (B == Fn::Pack) {
    return dtype_detail::pack(fwd, args...);
  } else if constexpr (B == Fn::Unpack) {
    return dtype_detail::unpack(fwd, args...);
  } else if constexpr (B == Fn::Pack_size) {
    return dtype_detail::pack_size(fwd, args...);
  } else if constexpr (B == Fn::Op_free) {
    // A user-defined op that libhier's pending requests still use (nonblocking, or persistent:
    // exec::hold_op) is freed by the last of them; the program's handle becomes MPI_OP_NULL now,
    // as the MPI's own free would make it. Test-only "op_free" (util/inject.hpp) frees it at
    // once, the negative control of the tests of this.
    MPI_Op* op = std::get<0>(std::tuple<Args...>(args...));
    if (op && !util::injected_failure("op_free") && exec::defer_op_free(*op)) {
      *op = MPI_OP_NULL;
      return {MPI_SUCCESS, diag::AlgoTag::Flat};
    }
    return passthrough(fwd);
  } else {
    // MPI_Type_free: the attribute's delete callback releases the canonical form.
    return passthrough(fwd);
  }
}

}  // namespace hier::core
