// The canonical form of a committed datatype: its bounds from the MPI and its typemap as a
// device::BlockProgram. Reference counted: the datatype's attribute holds one reference, every
// operation in flight (a pending receive) holds its own, so MPI_Type_free during a pending
// MPI_Irecv is safe.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "device/blocks.hpp"
#include "device/module.hpp"
#include "dtype/ir.hpp"

namespace hier::dtype {

struct Program {
  std::vector<device::Item> items;
  std::vector<device::SeqRange> seqs;
  std::vector<device::GatherEntry> entries;
  std::vector<int64_t> offsets;  // entries[k].off (device::BlockProgram::offsets)
};

// Flattens a simplified tree into a program (sequence 0 = `s`).
Program lower(const Seq& s);

struct Canon {
  bool ok = false;          // false: not representable exactly; `why` says why
  std::string why;
  Program prog;
  device::BlockProgram view;  // points into prog
  int64_t size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  bool dense = false;       // one element is one contiguous run
  bool contiguous = false;  // and consecutive elements touch: count elements are one run
  int64_t blocks = 0;       // contiguous runs per element
  int64_t min_block = 0;    // narrowest run (bytes)
  // The type signature's one element type, or MPI_DATATYPE_NULL (dtype/signature.hpp); set
  // whether or not the layout has an exact form.
  MPI_Datatype elem = MPI_DATATYPE_NULL;
  std::atomic<int> refs{1};
  // The program in device memory, for the GPU module's kernels (dtype/device_pack.cpp): one per
  // device ordinal, copied at the type's first use on a buffer of that device, discarded with
  // the Canon.
  std::atomic<void*> device_prog[device::kMaxDevices] = {};
  std::atomic<const device::ModuleTable*> device_mod{nullptr};  // set before any device_prog

  Canon() = default;
  Canon(const Canon&) = delete;
  Canon& operator=(const Canon&) = delete;
  ~Canon() {
    for (auto& d : device_prog)
      if (void* p = d.load()) device_mod.load()->discard(p);
  }

  void retain() { refs.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

// A new Canon (one reference) for a committed derived datatype; built with PMPI only.
Canon* canonicalize(MPI_Datatype t);

// Owning handle.
class CanonRef {
 public:
  CanonRef() = default;
  explicit CanonRef(Canon* c) : c_(c) {}  // adopts one reference
  CanonRef(const CanonRef& o) : c_(o.c_) { if (c_) c_->retain(); }
  CanonRef(CanonRef&& o) noexcept : c_(o.c_) { o.c_ = nullptr; }
  CanonRef& operator=(CanonRef o) noexcept { std::swap(c_, o.c_); return *this; }
  ~CanonRef() { if (c_) c_->release(); }
  Canon* get() const { return c_; }
  Canon* operator->() const { return c_; }
  const Canon& operator*() const { return *c_; }
  explicit operator bool() const { return c_ != nullptr; }
 private:
  Canon* c_ = nullptr;
};

}  // namespace hier::dtype
