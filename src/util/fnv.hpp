// FNV-1a, 64 bits: a stable hash of bytes, the same in every process of a job (communicator
// identities, call-site keys). Not for anything an adversary chooses (util/sha256.hpp is).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hier::util {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;

inline uint64_t fnv1a(const void* p, size_t n, uint64_t h = kFnvOffset) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

inline uint64_t fnv1a(const std::string& s, uint64_t h = kFnvOffset) { return fnv1a(s.data(), s.size(), h); }

}  // namespace hier::util
