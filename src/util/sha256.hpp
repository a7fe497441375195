// SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104): the watchdog's side channel authenticates its
// queries and answers with the job's secret (docs/diagnostics.md) without a crypto library, which
// would be one more runtime dependency of libhier.so. Checked against the FIPS and RFC 4231
// vectors (tests/unit/sha256_test.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hier::util {

using Digest = std::array<uint8_t, 32>;

Digest sha256(const void* data, size_t n);
Digest hmac_sha256(const void* key, size_t key_n, const void* msg, size_t msg_n);
std::string to_hex(const uint8_t* p, size_t n);
// Equal without an early exit, so the time taken does not tell how many leading bytes matched.
bool equal_constant_time(const void* a, const void* b, size_t n);

}  // namespace hier::util
