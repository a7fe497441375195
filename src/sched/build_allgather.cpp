// Allgather(v), cartesian, in bytes: allgather level by level, OUTERMOST first, so that only a
// rank's own block crosses the slowest links (every node position sends in parallel); each
// inner level then gathers what the outer ones collected. The data is assembled in hierarchical
// order (c_0 most significant) in scratch and finally stored block by block into the user's
// receive buffer in rank order.
#include "sched/build.hpp"

namespace hier::sched {

Schedule build_allgather(const topo::Shape& s, int rank, const std::vector<int64_t>& counts) {
  Schedule out;
  out.name = "allgather/ag-levels";
  out.unit = Unit::Bytes;
  const int P = s.size, k = s.nlevels() - 1;
  std::vector<int64_t> hoff(P + 1, 0);
  for (int p = 0; p < P; ++p) hoff[p + 1] = hoff[p] + counts[s.rank_at[p]];
  out.scratch = hoff[P];

  const int pos = s.position_of[rank];
  int span = 1;  // positions per member at this level
  for (int j = k; j >= 0; --j) {
    const int group = span * s.dims[j];
    const int base = pos - pos % group;
    Step ag;
    ag.comm = {On::Step, j};
    ag.dst = {Buf::Scratch, hoff[base]};
    if (j == k) ag.src = {Buf::Send, 0};
    else ag.in_place = true;  // what the outer levels gathered already sits at my displacement
    for (int i = 0; i < s.dims[j]; ++i) {
      ag.counts.push_back(hoff[base + (i + 1) * span] - hoff[base + i * span]);
      ag.displs.push_back(hoff[base + i * span] - hoff[base]);
    }
    uniform_to_allgather(ag);
    out.steps.push_back(ag);
    span = group;
  }
  for (int p = 0; p < P; ++p) {
    Step st;
    st.kind = Kind::StoreBlock;
    st.src = {Buf::Scratch, hoff[p]};
    st.block = s.rank_at[p];
    st.count = counts[st.block];
    out.steps.push_back(st);
  }
  return out;
}

Schedule even_allgather(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a) {
  (void)a;
  return build_allgather(s, rank, std::vector<int64_t>(static_cast<size_t>(s.size), units * unit_bytes / s.size));
}

}  // namespace hier::sched
