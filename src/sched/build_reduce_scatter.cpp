// Reduce_scatter(_block), cartesian: the input blocks are first copied into hierarchical order
// (c_0 most significant), so that the reduce-scatter at level j hands member c_j exactly the
// blocks of the ranks with that coordinate; then one reduce-scatter per level, innermost first
// (the data shrinks by s_j at each level before it crosses the next one). The last level
// delivers each rank's own block into its receive buffer.
#include <algorithm>

#include "sched/build.hpp"

namespace hier::sched {

Schedule build_reduce_scatter(const topo::Shape& s, int rank, const std::vector<int64_t>& counts, bool in_place) {
  Schedule out;
  out.name = "reduce_scatter/rs-levels";
  const int P = s.size, k = s.nlevels() - 1;
  std::vector<int64_t> udispl(P + 1, 0), hoff(P + 1, 0);
  for (int r = 0; r < P; ++r) udispl[r + 1] = udispl[r] + counts[r];
  for (int p = 0; p < P; ++p) hoff[p + 1] = hoff[p] + counts[s.rank_at[p]];
  const int64_t n = udispl[P];

  // Permute into scratch [0, n), merging runs of consecutive ranks into one copy.
  const Ref src0 = in_place ? Ref{Buf::Recv, 0} : Ref{Buf::Send, 0};
  for (int p = 0; p < P;) {
    int q = p + 1;
    while (q < P && s.rank_at[q] == s.rank_at[q - 1] + 1) ++q;
    const int64_t len = hoff[q] - hoff[p];
    if (len > 0) {
      Step c;
      c.kind = Kind::Copy;
      c.src = {src0.buf, src0.off + udispl[s.rank_at[p]]};
      c.dst = {Buf::Scratch, hoff[p]};
      c.count = len;
      out.steps.push_back(c);
    }
    p = q;
  }

  // Level j splits my current range of positions [base, base + span) into s_j parts.
  Ref cur{Buf::Scratch, 0};
  int base = 0, span = P;
  int64_t second = 0;  // size of the ping-pong region after [0, n)
  for (int j = 0; j <= k; ++j) {
    const int sub = span / s.dims[j];
    Step rs;
    rs.kind = Kind::ReduceScatter;
    rs.comm = {On::Step, j};
    rs.src = cur;
    for (int i = 0; i < s.dims[j]; ++i) rs.counts.push_back(hoff[base + (i + 1) * sub] - hoff[base + i * sub]);
    const int me = s.coord(rank, j);
    const int64_t mine = rs.counts[me];
    if (j == k) {
      rs.dst = {Buf::Recv, 0};
    } else if (cur.off == 0) {
      rs.dst = {Buf::Scratch, n};
      second = std::max(second, mine);
    } else {
      rs.dst = {Buf::Scratch, 0};
    }
    out.steps.push_back(rs);
    cur = rs.dst;
    base += me * sub;
    span = sub;
  }
  out.scratch = n + second;
  return out;
}

Schedule even_reduce_scatter(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a) {
  (void)unit_bytes, (void)a;
  return build_reduce_scatter(s, rank, split_even(units, s.size).counts, false);
}

}  // namespace hier::sched
