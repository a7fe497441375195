// Scratch memory reused across calls on one communicator (collectives on one communicator never
// run concurrently, so one buffer per communicator suffices), grown on demand.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <deque>
#include <memory>

namespace hier::exec {

class Scratch {
 public:
  // At least `bytes`, 64-byte aligned; the contents are not kept across calls.
  char* get(size_t bytes) {
    if (bytes > size_ || !buf_) {  // never null on success, even for 0 bytes
      const size_t want = bytes + bytes / 4 + 64;
      void* p = std::aligned_alloc(64, (want + 63) / 64 * 64);
      if (!p) return nullptr;
      buf_.reset(static_cast<char*>(p));
      size_ = want;
    }
    return buf_.get();
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> buf_;
  size_t size_ = 0;
};

// Numbered scratch buffers, for steps that run at the same time (a pipelined wave: each step
// of the wave uses its own index), created on first use and kept.
class ScratchSet {
 public:
  Scratch& operator[](size_t i) {
    while (set_.size() <= i) set_.emplace_back();
    return set_[i];
  }

 private:
  std::deque<Scratch> set_;  // a deque: growing it never moves the buffers handed out
};

// What one nonblocking request runs on (exec/request.hpp): scratch and the direct level steps'
// buffers of its own, so that requests outstanding together never share memory.
struct RequestMemory {
  Scratch scratch;
  ScratchSet tmp;
};

}  // namespace hier::exec
