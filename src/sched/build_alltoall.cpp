// Alltoall, cartesian, two phases (as ZeRO++ qgZ): inside the node each rank collects, for every
// destination node, the blocks its node peers send to the ranks at its own node position; then
// the ranks at one node position exchange those aggregated chunks across nodes (N-1 large
// messages per rank instead of P-m small ones). Local copies put blocks in order between phases.
// Positions: p = l * N + node, l = position in the node (c_0..c_{k-1}), N = nodes.
#include "sched/build.hpp"

namespace hier::sched {

Schedule build_alltoall(const topo::Shape& s, int rank, int64_t b) {
  Schedule out;
  out.name = "alltoall/two-phase";
  out.unit = Unit::Bytes;
  const int P = s.size, N = s.nnodes, m = P / N;
  const int64_t second = static_cast<int64_t>(P) * b;  // second half of scratch
  out.scratch = 2 * second;
  auto copy = [&](Kind k, Ref src, Ref dst, int block) {
    Step c;
    c.kind = k;
    c.src = src;
    c.dst = dst;
    c.block = block;
    c.count = b;
    out.steps.push_back(c);
  };
  // 1. My send blocks in position order: [destination l][destination node].
  for (int p = 0; p < P; ++p) copy(Kind::LoadBlock, {}, {Buf::Scratch, p * b}, s.rank_at[p]);
  // 2. Within the node: to peer l goes the chunk [l][*]; from peer ls comes [ls][*] for my l.
  Step a;
  a.kind = Kind::Alltoall;
  a.comm = {On::Node, 0};
  a.src = {Buf::Scratch, 0};
  a.dst = {Buf::Scratch, second};
  a.count = N * b;
  out.steps.push_back(a);
  // 3. Regroup [ls][node] -> [node][ls].
  for (int ls = 0; ls < m; ++ls)
    for (int nd = 0; nd < N; ++nd)
      copy(Kind::Copy, {Buf::Scratch, second + (ls * N + nd) * b}, {Buf::Scratch, (nd * m + ls) * b}, 0);
  // 4. Across nodes at my position: chunk [node] to that node; from node ns comes [ls] = the
  //    blocks that rank (ls, ns) sends me.
  a.comm = {On::Cross, 0};
  a.count = m * b;
  out.steps.push_back(a);
  // 5. Into the user's receive buffer, by source rank.
  for (int ns = 0; ns < N; ++ns)
    for (int ls = 0; ls < m; ++ls) copy(Kind::StoreBlock, {Buf::Scratch, second + (ns * m + ls) * b}, {}, s.rank_at[ls * N + ns]);
  return out;
}

Schedule even_alltoall(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a) {
  (void)a;
  return build_alltoall(s, rank, units * unit_bytes / s.size);
}

}  // namespace hier::sched
