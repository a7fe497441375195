// Point-to-point calls and MPI_Pack / MPI_Unpack with device buffers, on an MPI that is not
// GPU-aware (device/runtime_copy.hpp): the call runs on host copies that the GPU runtime makes,
// written back when it returns. Only blocking forms (and MPI_Pack / MPI_Unpack, which are
// local): a nonblocking call's copies would have to outlive it (not done; such calls go to the
// MPI as without libhier). A purely local choice: the peer sees the same bytes either way.
#pragma once

#include <mpi.h>

#include <optional>

#include "core/wrap.hpp"
#include "device/pointer.hpp"
#include "device/runtime_copy.hpp"
#include "device/stage.hpp"

namespace hier::core::device_p2p {

template <Fn F>
struct Call {};  // selects the overload of one MPI function

// Whether buffer p must be copied before the MPI sees it (one atomic load without a runtime).
inline bool must_stage(const void* p) {
  const device::Runtime r = device::runtime();
  if (r == device::Runtime::None || p == nullptr || p == MPI_IN_PLACE || p == MPI_BOTTOM) return false;
  return device::classify(p) != device::MemKind::Host && !device::mpi_gpu_aware(r);
}

// A host copy of `p` (n elements of t) when it must be staged; else p itself.
class Side {
 public:
  Side(const void* p, int64_t n, MPI_Datatype t) : user_(p) {
    if (must_stage(p)) st_.emplace(p, n, t);
  }
  bool staged() const { return st_.has_value(); }
  int rc() const { return st_ ? st_->rc() : MPI_SUCCESS; }
  void* ptr() const { return st_ ? st_->host() : const_cast<void*>(user_); }
  int copy_back() const { return st_ ? st_->copy_back(const_cast<void*>(user_)) : MPI_SUCCESS; }

 private:
  const void* user_;
  std::optional<device::HostStage> st_;
};

// Runs `call(host pointers...)` on the staged sides, copies the written side back, and counts
// the call as staged in the report's device section. nullopt: nothing to stage.
template <class Call>
std::optional<Outcome> run(const char* what, Side& in, Side* out, Call call) {
  if (!in.staged() && !(out && out->staged())) return std::nullopt;
  if (in.rc() != MPI_SUCCESS) return Outcome{in.rc(), diag::AlgoTag::Flat};
  if (out && out->rc() != MPI_SUCCESS) return Outcome{out->rc(), diag::AlgoTag::Flat};
  device::note_untouched(device::MemKind::Device, what);
  Outcome o = call();
  if (out && o.rc == MPI_SUCCESS) o.rc = out->copy_back();
  return o;
}

}  // namespace hier::core::device_p2p
