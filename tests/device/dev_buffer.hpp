// "Device memory" of the stand-in runtime (fake_gpu.h) holding a copy of a host vector, for the
// device tests that compare what libhier leaves there with the MPI's result on host memory.
#pragma once

#include <cstddef>
#include <vector>

#include "fake_gpu.h"

namespace hier::test {

struct Dev {
  char* p;
  size_t n;
  explicit Dev(const std::vector<char>& v) : p(static_cast<char*>(fake_gpu_alloc(v.size() ? v.size() : 1, 0))), n(v.size()) {
    fake_gpu_copy(p, v.data(), n);
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { fake_gpu_free(p); }
  std::vector<char> get() const {
    std::vector<char> v(n);
    fake_gpu_copy(v.data(), p, n);
    return v;
  }
};

}  // namespace hier::test
