// Staging buffers for packed messages. Freshly malloc'ed large buffers cost page faults on
// first touch (about as much as the copy itself), so released buffers are kept per power-of-two
// size class, up to a bounded total, and reused.
#pragma once

#include <cstddef>

namespace hier::dtype {

struct Staging {
  char* p = nullptr;
  size_t cap = 0;
};

Staging stage_acquire(size_t bytes);
void stage_release(Staging s);
void stage_trim();  // frees every kept buffer (finalize)

}  // namespace hier::dtype
