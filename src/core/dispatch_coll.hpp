// The one dispatch point of the coll family: collectives, blocking and nonblocking (hierarchical schedules plug in here).
// Every generated wrapper of the family calls dispatch_coll<Fn::X>(fwd, args...), where fwd()
// forwards the call to PMPI unchanged. Features add behaviour here, for the functions they
// handle, and return passthrough(fwd) for everything they cannot do exactly.
#pragma once

#include <climits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <type_traits>

#include "core/coll_device.hpp"
#include "core/colls.hpp"
#include "core/wrap.hpp"
#include "device/module.hpp"
#include "device/runtime_copy.hpp"
#include "exec/coll_quant.hpp"
#include "exec/context.hpp"
#include "exec/device_steps.hpp"
#include "exec/entry.hpp"
#include "exec/own_progress.hpp"
#include "exec/prepare.hpp"
#include "exec/request.hpp"
#include "exec/typed.hpp"

namespace hier::core {

namespace coll_detail {
// Large-count (_c) variants reach the same code when every count fits an int; arrays of
// MPI_Count (the v-variants) and larger counts stay flat.
template <class T>
constexpr bool fits(const T& v) {
  if constexpr (std::is_same_v<T, MPI_Count>) return v >= 0 && v <= INT_MAX;
  else return true;
}
template <class T>
constexpr auto narrow(const T& v) {
  if constexpr (std::is_same_v<T, MPI_Count>) return static_cast<int>(v);
  else return v;
}

// The forms of the rewritten collectives (core/colls.hpp, from config/collectives.def): the
// blocking collective whose schedule a nonblocking (MPI_I...) or persistent (MPI_..._init) one runs.
template <Fn B>
constexpr Fn blocking_of() {
  return coll_row(B) >= 0 ? kColls[coll_row(B)].blocking : B;
}

// req: null for a blocking call; the nonblocking call's handle otherwise.
template <Fn B, class... Args>
std::optional<exec::Ran> hierarchical(MPI_Request* req, Args... a) {
  if constexpr (false) {
  }
#define HIER_COLL(name, key, blocking, nonblocking, persistent, ...) \
  else if constexpr (B == Fn::blocking) return exec::key(a..., req);
#include "config/collectives.def"
  else return std::nullopt;
}

// The info of the persistent call being dispatched on this thread (persistent() below): the
// MPI's own persistent form gets it where libhier leaves the call to the MPI.
inline thread_local MPI_Info tl_persistent_info = MPI_INFO_NULL;
inline MPI_Info persistent_info() { return tl_persistent_info; }

// The hierarchical path of a collective with buffers, safe for device memory. Order matters:
// every test before the communicator's agreement uses only what all ranks share (arguments,
// configuration), so all ranks reach the agreement, and the same schedule, together.
// A call the MPI runs as it is: the user's buffers, unless some are device memory the MPI does
// not take; then the MPI's collective on host copies of them (a local choice: every rank calls
// the same MPI collective either way).
template <Fn B, class Fwd, class... Args>
Outcome mpi_on_copies(Fwd& fwd, coll_device::Shape& s, device::MemKind kind, const char* gpu_aware_key,
                      const char* staged_key, MPI_Request* req, Args&... a) {
  if (kind == device::MemKind::Host) return passthrough(fwd);
  if (device::mpi_gpu_aware(device::runtime(), config::get().gpu_aware)) {
    device::note_untouched(kind, gpu_aware_key);
    return passthrough(fwd);
  }
  if (exec::persistent_init_scope()) {  // the MPI's persistent form, on host copies kept with its request
    device::note_untouched(kind, "staged_persistent_mpi");
    return coll_device::persistent_on_copies<B>(s, persistent_info(), req, a...);
  }
  device::note_untouched(kind, staged_key);
  if (req) return coll_device::start_on_copies<B>(s, req, a...);  // stays nonblocking
  coll_device::Staged staged(s);
  if (staged.rc() != MPI_SUCCESS) return own_error(staged.rc());
  const int rc = coll_device::flat_on_host<B>(a...);
  const int back = staged.finish();
  return rc != MPI_SUCCESS ? Outcome{rc, diag::AlgoTag::Flat} : own_error(back);
}
template <Fn B, class Fwd, class... Args>
Outcome to_mpi(Fwd& fwd, coll_device::Shape& s, device::MemKind kind, MPI_Request* req, Args&... a) {
  return mpi_on_copies<B>(fwd, s, kind, config::coll_key(s.coll), "staged", req, a...);
}

// A collective libhier forwards (core/forwarded_colls.def; B its blocking form, req the
// nonblocking form's request or null): the MPI's own call, on host copies of device buffers
// where the MPI is not GPU-aware. Without a GPU runtime in the process: one atomic load.
template <Fn B, class Fwd, class... Args>
Outcome forwarded(Fwd& fwd, MPI_Request* req, Args... a) {
  if (device::runtime() == device::Runtime::None) return passthrough(fwd);
  // An intercommunicator's counts are the remote group's, and its roots are not local ranks:
  // left to the MPI as it is (its device buffers too).
  int inter = 0;
  if (PMPI_Comm_test_inter(std::get<sizeof...(Args) - 1>(std::tie(a...)), &inter) != MPI_SUCCESS || inter)
    return passthrough(fwd);
  coll_device::Shape s = coll_device::forwarded_shape<B>(a...);
  const char *key = "", *staged_key = "staged";  // the report's (device/pointer.cpp, path_of)
#define HIER_FORWARDED_COLL(blocking, nonblocking, kind, name) \
  if (B == Fn::blocking) key = #name, staged_key = "staged_" #name;
#include "core/forwarded_colls.def"
  return mpi_on_copies<B>(fwd, s, s.kind(), key, staged_key, req, a...);
}
template <Fn B>
constexpr Fn forwarded_blocking() {
#define HIER_FORWARDED_COLL(blocking, nonblocking, kind, key) \
  if (B == Fn::blocking || B == Fn::nonblocking) return Fn::blocking;
#include "core/forwarded_colls.def"
  return Fn::Count;
}
// The nonblocking form: the blocking form's arguments, then the request.
template <Fn B, class Fwd, class Tuple, size_t... I>
Outcome forwarded_nonblocking(Fwd& fwd, Tuple t, std::index_sequence<I...>) {
  return forwarded<B>(fwd, std::get<sizeof...(I)>(t), std::get<I>(t)...);
}

// The collectives whose schedules run on device buffers (exec/device_steps.hpp), blocking and
// nonblocking: collectives.def's Device column; on a device_hier communicator the others go to
// the GPU-aware MPI on every rank.
template <Fn B>
constexpr bool kReductions = B == Fn::Allreduce || B == Fn::Reduce || B == Fn::Reduce_scatter_block ||
                             B == Fn::Reduce_scatter;
template <Fn B>
constexpr bool kDeviceSchedules = coll_row(B) >= 0 && kColls[coll_row(B)].blocking == B && kColls[coll_row(B)].device;

// Persistent collectives on a device_hier communicator: the request keeps its binding for every
// MPI_Start. Every collective with device schedules runs libhier's schedule, decided from the
// call's form and, for a reduction, its type and op, which every rank passes alike: a reduction
// whose (type, op) has a kernel on a dense type; every movement collective (allgather,
// allgatherv, bcast, alltoall, gather, scatter: bytes copied, whatever the type), quantized or
// not. A rank whose buffers cannot be bound (device memory of a non-dense type, or host and
// device memory mixed) runs it on host copies kept with its request (persistent_staged); one
// whose buffers are all host memory binds them there.
template <Fn B, class... Args>
bool persistent_on_device(const coll_device::Shape& s, const Args&... a) {
  if constexpr (kReductions<B>)
    return exec::type_info(s.type).dense && exec::device_reducible(s.type, std::get<4>(std::forward_as_tuple(a...)));
  (void)s;
  return true;
}

// The report's key of a call run by libhier's schedule bound to device buffers: by path
// (staged: its message steps through host memory, exec::GpuPath::DeviceStaged), whether it ran
// quantized, and by form.
inline std::string hier_device_key(const MPI_Request* req, bool staged, bool quantized) {
  std::string k = staged ? "hier_staged" : "hier_device";
  if (quantized) k += "_quant";
  if (req) k += exec::persistent_init_scope() ? "_persistent" : "_nonblocking";
  return k;
}

// The device this rank binds the call's buffers on (-1: it does not): every buffer it uses is
// device memory of a dense type on that one device (its ordinal below device::kMaxDevices), and
// a reduction has a kernel. A local choice (the schedule is the same whatever the binding):
// otherwise the rank stages, or runs on its host buffers. Quantized calls too, 16-bit values
// (MPIX_C_FLOAT16) and HIER_QUANT_CHECK included (exec/quant_call.cpp).
template <Fn B, class... Args>
int binds_device(const coll_device::Shape& s, const Args&... a) {
  int dev = -1;
  for (int i = 0; i < s.n; ++i) {
    if (!s.used(i)) continue;
    if (s.buf[i].kind() != device::MemKind::Device || !exec::type_info(s.buf[i].type).dense) return -1;
    const int d = device::device_of(static_cast<const char*>(*s.buf[i].slot) + s.buf[i].offset);
    if (d < 0 || d >= device::kMaxDevices || (dev >= 0 && d != dev)) return -1;  // buffers on two devices: staged
    dev = d;
  }
  // The reductions' op is their fifth argument (sendbuf, recvbuf, count(s), type, op, ...): by
  // position, since MPICH's handles are all ints.
  if constexpr (kReductions<B>)
    if (!exec::device_reducible(s.type, std::get<4>(std::forward_as_tuple(a...)))) return -1;
  return dev;
}

// A persistent collective whose schedule this rank runs on host copies of its device buffers:
// the copies live with the request, refreshed from the device at every MPI_Start and copied
// back when each start completes. A call the plan leaves flat goes to the MPI as one that
// libhier does not rewrite (to_mpi: on an MPI that is not GPU-aware, its own persistent form on
// host copies kept with its request).
template <Fn B, class Fwd, class... Args>
Outcome persistent_staged(Fwd& fwd, coll_device::Shape& s, device::MemKind kind, MPI_Request* req, Args&... a) {
  auto st = std::make_shared<coll_device::HostCopies>(s);
  if (st->rc() != MPI_SUCCESS) return own_error(st->rc());
  auto ran = hierarchical<B>(req, a...);
  st->restore(s);
  if (!ran) return to_mpi<B>(fwd, s, kind, req, a...);
  if (ran->rc == MPI_SUCCESS) {
    const int rc = exec::wrap_persistent(*req, [st] { return st->refresh(); }, [st] { return st->copy_back(); });
    if (rc != MPI_SUCCESS) return {rc, ran->algo};
  }
  device::note_untouched(kind, "staged_persistent");
  return {ran->rc, ran->algo};
}

template <Fn B, class Fwd, class... Args>
Outcome with_buffers(Fwd& fwd, MPI_Request* req, Args... a) {
  coll_device::Shape s = coll_device::shape<B>(a...);
  // exec asks may_rewrite again: cheap. kind() is one atomic load without a GPU runtime.
  if (!exec::may_rewrite(s.coll, s.type, s.count)) return to_mpi<B>(fwd, s, s.kind(), req, a...);
  const device::MemKind kind = s.kind();
  // The communicator's context is built here, at the same call on every rank, with the GPU
  // state agreed on with its levels (exec::Context::device_to_mpi, device_hier).
  bool bind_device = false;
  const exec::GpuPath path = exec::gpu_path(s.comm, &bind_device);
  if (path == exec::GpuPath::ToMpi) return to_mpi<B>(fwd, s, kind, req, a...);
  const bool step_staged = path == exec::GpuPath::DeviceStaged;  // (an MPI that is not GPU-aware)
  if (path == exec::GpuPath::DeviceHier || step_staged) {
    // Decided from what every rank shares (the collective, its form, a persistent reduction's
    // type and op), never from buffers.
    if (!kDeviceSchedules<B> || (exec::persistent_init_scope() && !persistent_on_device<B>(s, a...)))
      return to_mpi<B>(fwd, s, kind, req, a...);
    if (const int dev = kind != device::MemKind::Host && bind_device ? binds_device<B>(s, a...) : -1; dev >= 0) {
      // On the buffers' device (current for the call; the caller's again after it). Nonblocking:
      // the request keeps the device binding (exec/request.hpp).
      exec::DeviceCall scope(s.comm, dev);
      auto ran = hierarchical<B>(req, a...);
      if (!ran) return to_mpi<B>(fwd, s, kind, req, a...);  // left flat: the MPI's own (on host copies where staged)
      const bool quantized = ran->algo == diag::AlgoTag::HierInt8 || ran->algo == diag::AlgoTag::HierInt4;
      device::note_untouched(kind, hier_device_key(req, step_staged, quantized).c_str());
      return {ran->rc, ran->algo};
    }
  }
  if (kind == device::MemKind::Host) {
    if (auto ran = hierarchical<B>(req, a...)) return {ran->rc, ran->algo};  // Hier, or HierInt8/4 (quantized)
    return passthrough(fwd);
  }
  // Device buffers on a communicator that runs host schedules (the MPI is not GPU-aware, or the
  // runtime came after the agreement), or that a device_hier rank cannot bind (a non-dense type,
  // host and device memory mixed): the other ranks may run the schedule, so this one must too,
  // on host copies of its device buffers (made by the runtime, or by a GPU-aware MPI). A
  // persistent collective keeps its copies with its request (persistent_staged).
  if (exec::persistent_init_scope()) return persistent_staged<B>(fwd, s, kind, req, a...);
  coll_device::Staged staged(s);
  if (staged.rc() != MPI_SUCCESS) return own_error(staged.rc());
  auto ran = hierarchical<B>(req, a...);
  int rc = MPI_SUCCESS;
  diag::AlgoTag tag = diag::AlgoTag::Flat;
  if (!ran && req) {
    // Left flat, nonblocking: the MPI's own call on copies that live until it completes, so
    // that it stays nonblocking (these copies go back at the return).
    staged.cancel();
    device::note_untouched(kind, "staged");
    return coll_device::start_on_copies<B>(s, req, a...);
  }
  device::note_untouched(kind, "staged");
  if (ran && req && ran->rc == MPI_SUCCESS) {
    // Nonblocking: libhier's request owns the copies, which go back to the device once its
    // schedule completed, before the program's MPI_Wait / MPI_Test sees it complete.
    auto copies = staged.release();
    auto back = [copies] { return copies->copy_back(); };
    if (exec::when_complete(*req, back)) return {ran->rc, ran->algo};
    return {back(), ran->algo};  // it completed inside the call already
  }
  if (!ran) {
    rc = coll_device::flat_on_host<B>(a...);  // the MPI may not take device pointers
  } else {
    rc = ran->rc;
    tag = ran->algo;
  }
  const int back = staged.finish();
  if (rc != MPI_SUCCESS) return {rc, tag};
  return {back, tag, tag == diag::AlgoTag::Flat && back != MPI_SUCCESS};  // the copy back failed: libhier's own
}

// The request form of blocking collective B: MPI_Ibarrier / MPI_Barrier_init have no buffers.
template <Fn B, class Fwd, class... Args>
Outcome request_form(Fwd& fwd, MPI_Request* req, Args... a) {
  if constexpr (B == Fn::Barrier) {
    if (auto ran = hierarchical<B>(req, a...)) return {ran->rc, ran->algo};
    return passthrough(fwd);
  } else {
    return with_buffers<B>(fwd, req, a...);
  }
}

// A nonblocking call: the blocking collective's arguments, then the request.
template <Fn B, class Fwd, class Tuple, size_t... I>
Outcome nonblocking(Fwd& fwd, Tuple t, std::index_sequence<I...>) {
  return request_form<blocking_of<B>()>(fwd, std::get<sizeof...(I)>(t), std::get<I>(t)...);
}

// A persistent collective (MPI_Allreduce_init, ...): the blocking collective's arguments, the
// info (no hints are read), then the request; made persistent (exec/request.hpp).
template <Fn B, class Fwd, class Tuple, size_t... I>
Outcome persistent(Fwd& fwd, Tuple t, std::index_sequence<I...>) {
  exec::PersistentInit scope;
  tl_persistent_info = std::get<sizeof...(I)>(t);
  return request_form<blocking_of<B>()>(fwd, std::get<sizeof...(I) + 1>(t), std::get<I>(t)...);
}

template <Fn B>
constexpr bool has_persistent = coll_row(B) >= 0 && kColls[coll_row(B)].persistent == B;
template <Fn B>
constexpr bool has_nonblocking = coll_row(B) >= 0 && kColls[coll_row(B)].nonblocking == B;
template <Fn B>
constexpr bool has_hierarchical = coll_row(B) >= 0 && kColls[coll_row(B)].blocking == B;
}  // namespace coll_detail

namespace coll_detail {
template <Fn F, class Fwd, class... Args>
Outcome dispatch(Fwd& fwd, Args... args);
// MPI_..._init (and _init_c): a persistent collective, whose handle no completion call nulls.
constexpr bool persistent_init(Fn f) {
  const std::string_view n = fn_name(static_cast<int>(f));
  return n.ends_with("_init") || n.ends_with("_init_c");
}
}  // namespace coll_detail

// Every collective call. A nonblocking one (its last argument the request, and no persistent
// MPI_..._init form) that the MPI runs as its own call is handed to the progress thread
// (exec/own_progress.hpp: HIER_PROGRESS=thread+mpi; libhier's own requests it advances anyway).
template <Fn F, class Fwd, class... Args>
inline Outcome dispatch_coll(Fwd& fwd, Args... args) {
  const Outcome o = coll_detail::dispatch<F>(fwd, args...);
  using Last = std::tuple_element_t<sizeof...(Args) - 1, std::tuple<Args...>>;
  if constexpr (std::is_same_v<Last, MPI_Request*> && !coll_detail::persistent_init(F))
    if (o.rc == MPI_SUCCESS) exec::own_progress::track(*std::get<sizeof...(Args) - 1>(std::tie(args...)));
  return o;
}

template <Fn F, class Fwd, class... Args>
inline Outcome coll_detail::dispatch(Fwd& fwd, Args... args) {
  constexpr Fn B = base_of(F);
  exec::progress();  // libhier's outstanding nonblocking collectives advance in every collective call
  // Every collective, rewritten or not, enters its communicator first: the first one creates
  // libhier's shadow of it on every rank alike (exec/context.hpp), whatever each rank calls.
  static_assert(comm_arg(F) >= 0, "a collective without a communicator argument");
  exec::enter(std::get<comm_arg(F)>(std::tie(args...)));
  if constexpr (coll_detail::has_nonblocking<B>) {
    constexpr Fn BB = coll_detail::blocking_of<B>();
    if constexpr ((std::is_convertible_v<decltype(coll_detail::narrow(args)), decltype(args)> && ...) &&
                  (F == B || (BB != Fn::Reduce_scatter && BB != Fn::Allgatherv))) {
      if ((coll_detail::fits(args) && ...))
        return coll_detail::nonblocking<B>(fwd, std::make_tuple(coll_detail::narrow(args)...),
                                           std::make_index_sequence<sizeof...(Args) - 1>{});
    }
  } else if constexpr (coll_detail::has_persistent<B>) {
    return coll_detail::persistent<B>(fwd, std::make_tuple(args...), std::make_index_sequence<sizeof...(Args) - 2>{});
  } else if constexpr (coll_detail::forwarded_blocking<B>() != Fn::Count && F == B) {
    constexpr Fn BB = coll_detail::forwarded_blocking<B>();
    if constexpr (B == BB) return coll_detail::forwarded<BB>(fwd, nullptr, args...);
    else return coll_detail::forwarded_nonblocking<BB>(fwd, std::make_tuple(args...),
                                                        std::make_index_sequence<sizeof...(Args) - 1>{});
  } else if constexpr (coll_detail::has_hierarchical<B>) {
    // v-variants of the large-count family pass arrays of MPI_Count: not convertible, flat.
    if constexpr ((std::is_convertible_v<decltype(coll_detail::narrow(args)), decltype(args)> && ...) &&
                  (F == B || (B != Fn::Reduce_scatter && B != Fn::Allgatherv))) {
      if ((coll_detail::fits(args) && ...)) {
        if constexpr (B == Fn::Barrier) {
          if (auto ran = coll_detail::hierarchical<B>(nullptr, coll_detail::narrow(args)...)) return {ran->rc, ran->algo};
        } else {
          return coll_detail::with_buffers<B>(fwd, nullptr, coll_detail::narrow(args)...);
        }
      }
    }
  }
  return passthrough(fwd);
}

}  // namespace hier::core
