// Point-to-point calls and MPI_Pack / MPI_Unpack with device buffers, on an MPI that is not
// GPU-aware (device/runtime_copy.hpp): the call runs on host copies that the GPU runtime makes.
// Blocking calls (and MPI_Pack / MPI_Unpack, which are local) write them back when they return;
// MPI_Isend / MPI_Irecv keep theirs with the request, as the datatype engine's packed requests
// do (dtype/requests.hpp), until the request completes. A purely local choice: the peer sees
// the same bytes either way.
#pragma once

#include <mpi.h>

#include <optional>

#include "config/config.hpp"
#include "core/wrap.hpp"
#include "device/pointer.hpp"
#include "device/runtime_copy.hpp"
#include "device/stage.hpp"
#include "dtype/requests.hpp"
#include "dtype/staging.hpp"

namespace hier::core::device_p2p {

template <Fn F>
struct Call {};  // selects the overload of one MPI function

// Whether buffer p must be copied before the MPI sees it (one atomic load without a runtime).
// MPI_BOTTOM (null) too: classify_typed finds a type of absolute device addresses at its lower
// bound, and HostStage copies that span and hands the MPI `copy - lb`, the same offset as for
// any other span, so base + displacement lands in the copy.
inline bool must_stage(const void* p, int64_t n, MPI_Datatype t) {
  const device::Runtime r = device::runtime();
  if (r == device::Runtime::None || p == MPI_IN_PLACE) return false;
  return device::classify_typed(p, n, t) != device::MemKind::Host && !device::mpi_gpu_aware(r, config::get().gpu_aware);
}

// A host copy of `p` (n elements of t) when it must be staged; else p itself.
class Side {
 public:
  Side(const void* p, int64_t n, MPI_Datatype t) : user_(p) {
    if (must_stage(p, n, t)) st_.emplace(p, n, t, /*mpi_packs_device=*/false);  // staged: the MPI is not GPU-aware
  }
  bool staged() const { return st_.has_value(); }
  int rc() const { return st_ ? st_->rc() : MPI_SUCCESS; }
  void* ptr() const { return st_ ? st_->host() : const_cast<void*>(user_); }
  int copy_back() const { return st_ ? st_->copy_back(const_cast<void*>(user_)) : MPI_SUCCESS; }

 private:
  const void* user_;
  std::optional<device::HostStage> st_;
};

// Set while `run` dispatches a call again on its host copies: those are libhier's own host
// memory, never staged again (a runtime that fails every pointer query with an error it does not
// explain makes every buffer look like device memory, and each copy would be staged anew,
// without end: mpi.device_faults.copies_hip.hipPointerGetAttribute_1__999).
inline thread_local int tl_on_host_copies = 0;

// Runs `call(host pointers...)` on the staged sides, copies the written side back, and counts
// the call as staged in the report's device section. nullopt: nothing to stage.
template <class Call>
std::optional<Outcome> run(const char* what, Side& in, Side* out, Call call) {
  if (!in.staged() && !(out && out->staged())) return std::nullopt;
  if (in.rc() != MPI_SUCCESS) return own_error(in.rc());
  if (out && out->rc() != MPI_SUCCESS) return own_error(out->rc());
  device::note_untouched(device::MemKind::Device, what);
  struct OnCopies {
    OnCopies() { ++tl_on_host_copies; }
    ~OnCopies() { --tl_on_host_copies; }
  };
  Outcome o = [&] {
    OnCopies scope;
    return call();
  }();
  // Back on an error too: a truncated receive still delivers the part that fits, where the MPI
  // does (tests/dtype/p2p_test.cpp's TruncationLikeTheMPI on device buffers); the bytes the call
  // did not write go back as they were, as a staged MPI_Irecv's span does.
  if (out) {
    const int rc = out->copy_back();
    if (o.rc == MPI_SUCCESS && rc != MPI_SUCCESS) o = own_error(rc);
  }
  return o;
}

// MPI_Isend / MPI_Irecv of a device buffer: the span of its n elements of t copied into a
// staging buffer (a receive too: the bytes that do not arrive go back as they were), the MPI's
// call on it, and the request owned until completion. nullopt: nothing to stage.
template <class Start>
std::optional<Outcome> start_staged(const void* buf, int64_t n, MPI_Datatype t, MPI_Request* req, bool recv,
                                    const char* what, Start start) {
  if (!must_stage(buf, n, t)) return std::nullopt;
  MPI_Aint lb = 0;
  const int64_t span = device::span_bytes(t, n, &lb);
  if (span < 0) return own_error(MPI_ERR_TYPE);
  dtype::Staging s = dtype::stage_acquire(static_cast<size_t>(span > 0 ? span : 1));
  if (!s.p) return own_error(MPI_ERR_NO_MEM);
  char* dev_first = static_cast<char*>(const_cast<void*>(buf)) + lb;
  if (!device::runtime_copy(s.p, dev_first, static_cast<size_t>(span))) {
    dtype::stage_release(s);
    return own_error(MPI_ERR_OTHER);
  }
  device::note_untouched(device::MemKind::Device, what);
  const int rc = start(s.p - lb);  // element 0 of the host copy
  if (rc != MPI_SUCCESS) dtype::stage_release(s);
  else if (recv) dtype::own_device_recv(*req, s, dev_first, static_cast<size_t>(span));
  else dtype::own_send(*req, s);
  return Outcome{rc, diag::AlgoTag::Flat};
}

}  // namespace hier::core::device_p2p
