// The bytes of a level step's pieces (sched/pieces.hpp).
#include "sched/pieces.hpp"

#include <algorithm>

namespace hier::sched {

PieceBytes piece_bytes(const Step& s, const PieceView& v) {
  PieceBytes b;
  for_each_piece(s, v, [&b](Side side, int64_t, int64_t bytes) {
    (side == Side::WriteDst ? b.written : b.read) += bytes;
  });
  return b;
}

PieceBytes most_piece_bytes(const Step& s, int size, int64_t elem_bytes) {
  size = std::max(size, 1);
  // A rank's bytes depend on which rank it is only through whether it is the step's root and
  // through its own count (counts[me]), growing with it: the walk's loops over the members are
  // the same on every rank. So the most is at the root or at the non-root with the largest
  // count, two walks instead of one per rank (an allgatherv's walk is O(size) itself).
  // tests/unit/model_device_test.cpp checks this against every rank.
  const int root = s.root >= 0 && s.root < size ? s.root : 0;
  int other = -1;
  for (int i = 0; i < size; ++i)
    if (i != root && (other < 0 || member_at(s.counts, i) > member_at(s.counts, other))) other = i;
  PieceBytes most = piece_bytes(s, piece_view(s, root, size, elem_bytes));
  if (other >= 0) {
    const PieceBytes b = piece_bytes(s, piece_view(s, other, size, elem_bytes));
    most.read = std::max(most.read, b.read);
    most.written = std::max(most.written, b.written);
  }
  return most;
}

}  // namespace hier::sched
