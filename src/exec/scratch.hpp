// Scratch memory reused across calls on one communicator (collectives on one communicator never
// run concurrently, so one buffer per communicator suffices), grown on demand.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <deque>
#include <cstdint>
#include <memory>

namespace hier::exec {

// Where a bound buffer lives (exec/executor.hpp's Binding): host memory, or device memory that
// only the GPU module's kernels and a GPU-aware MPI touch (exec/device_steps.hpp). Pinned: host
// memory the GPU module page-locked (scratch only: the staging of exec/device_stage.hpp).
enum class Loc : uint8_t { Host, Device, Pinned };

// Device memory from the GPU module (exec/device_steps.cpp); null when there is none.
void* device_alloc(size_t bytes);
void device_free(void* p);
// Page-locked host memory from the GPU module (exec/device_steps.cpp); null when there is none.
void* pinned_alloc(size_t bytes);
void pinned_free(void* p);

class Scratch {
 public:
  explicit Scratch(Loc loc = Loc::Host) : buf_(nullptr, Free{loc}), loc_(loc) {}
  // At least `bytes`, 64-byte aligned; the contents are not kept across calls.
  char* get(size_t bytes) {
    if (bytes > size_ || !buf_) {  // never null on success, even for 0 bytes
      const size_t want = (bytes + bytes / 4 + 64 + 63) / 64 * 64;
      void* p = loc_ == Loc::Host     ? std::aligned_alloc(64, want)
                : loc_ == Loc::Device ? device_alloc(want)
                                      : pinned_alloc(want);
      if (!p) return nullptr;
      buf_.reset(static_cast<char*>(p));
      size_ = want;
    }
    return buf_.get();
  }

 private:
  struct Free {
    Loc loc;
    void operator()(char* p) const {
      if (loc == Loc::Host) std::free(p);
      else if (loc == Loc::Device) device_free(p);
      else pinned_free(p);
    }
  };
  std::unique_ptr<char, Free> buf_;
  size_t size_ = 0;
  Loc loc_;
};

// Numbered scratch buffers, for steps that run at the same time (a pipelined wave: each step
// of the wave uses its own index), created on first use and kept.
class ScratchSet {
 public:
  explicit ScratchSet(Loc loc = Loc::Host) : loc_(loc) {}
  Scratch& operator[](size_t i) {
    while (set_.size() <= i) set_.emplace_back(loc_);
    return set_[i];
  }

 private:
  Loc loc_;
  std::deque<Scratch> set_;  // a deque: growing it never moves the buffers handed out
};

// What one nonblocking request runs on (exec/request.hpp): scratch and the direct level steps'
// buffers of its own, so that requests outstanding together never share memory. A request
// bound to device buffers (exec/device_steps.hpp) takes the device pair instead; each is
// allocated at its first use only, and kept with the memory for the next request.
struct RequestMemory {
  Scratch scratch;
  ScratchSet tmp;
  Scratch dscratch{Loc::Device};
  ScratchSet dtmp{Loc::Device};
  int device = -1;                // the device ordinal dscratch and dtmp belong to
  ScratchSet stage{Loc::Pinned};  // staged device bindings (exec/device_stage.hpp): host copies of message steps
};

}  // namespace hier::exec
