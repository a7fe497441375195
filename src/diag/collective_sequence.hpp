// The signatures of this rank's blocking collectives on MPI_COMM_WORLD (inside src/diag, not for
// other layers): a running hash of (collective, bytes, root), their count and the last
// kSeqRing signatures, kept on the hot path (DiagScope), sent to rank 0 at finalize (sites.cpp)
// and compared there: the report's `collective_check` (docs/diagnostics.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hier::diag {

constexpr int kSeqRing = 16;  // signatures of the last collectives on MPI_COMM_WORLD

// One rank's sequence as sent at finalize (trivially copyable).
struct SeqRecord {
  uint64_t n;     // collectives made
  uint64_t hash;  // running hash of their signatures
  uint64_t ring[kSeqRing];  // signature of collective #k at ring[k % kSeqRing]
};

inline uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Hot path: one more blocking collective on MPI_COMM_WORLD (plain stores; its caller's thread).
void sequence_record(int fn, int root, uint64_t bytes) noexcept;
// This rank's sequence now.
SeqRecord sequence_now();
// Rank 0: every rank's sequence (by rank) compared, as the report's `collective_check` section
// (JSON text); a mismatch is also one WARN line naming the first difference where found.
std::string sequence_check_json(const std::vector<SeqRecord>& ranks);

}  // namespace hier::diag
