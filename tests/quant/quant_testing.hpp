// Shared by the kernel tests (quant_test.cpp, quant_f16_test.cpp): quantize into a guarded
// buffer (nothing written past its end; the count of blocks that could not be quantized checked
// or returned) and read a block's scale.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "quant/format.hpp"
#include "quant/quant.hpp"

namespace hq = hier::quant;

namespace {

using Bytes = std::vector<unsigned char>;

template <class T>
Bytes quantize(const std::vector<T>& x, int64_t b, int bits, int64_t* bad = nullptr) {
  Bytes q(hq::quantized_bytes(static_cast<int64_t>(x.size()), b, bits) + 16, 0xAB);  // guard
  const int64_t nbad = hq::quantize(x.data(), static_cast<int64_t>(x.size()), b, bits, q.data());
  if (bad) *bad = nbad;
  else EXPECT_EQ(nbad, 0);
  for (size_t i = q.size() - 16; i < q.size(); ++i) EXPECT_EQ(q[i], 0xAB) << "wrote past the end";
  q.resize(q.size() - 16);
  return q;
}

float scale_of(const Bytes& q, int64_t k, int64_t b, int bits) {
  float s;
  std::memcpy(&s, q.data() + hq::record_offset(k, b, bits), 4);
  return s;
}

}  // namespace
