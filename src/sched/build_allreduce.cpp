// Allreduce. rs-ar-ag (cartesian): the vector is reduce-scattered up the levels (each rank ends
// with a 1/(s_0...s_{k-1}) shard), the shard is allreduced across nodes by every node position
// at once (all links busy), and allgathered back down. tree (any shape): reduce to the node
// leader, allreduce among leaders, bcast in the node. Either way every element is reduced in
// one place and then copied, so every rank gets the same bits.
#include <algorithm>

#include "sched/build.hpp"

namespace hier::sched {
namespace {

Step on_step(Kind k, int level) {
  Step s;
  s.kind = k;
  s.comm = {On::Step, level};
  return s;
}

// The cross-node step on my shard `at` (len units). ordered: reduce-scatter + allgatherv.
void top_level(Schedule& out, int level, int members, Ref at, int64_t len, bool ordered) {
  if (!ordered) {
    Step ar = on_step(Kind::Allreduce, level);
    ar.in_place = true;
    ar.dst = at;
    ar.count = len;
    out.steps.push_back(ar);
    return;
  }
  const Split sp = split_even(len, members);
  // Scratch is free past what the reduce-scatter phase used: put the piece at its end.
  Ref piece{Buf::Scratch, out.scratch};
  out.scratch += *std::max_element(sp.counts.begin(), sp.counts.end());
  Step rs = on_step(Kind::ReduceScatter, level);
  rs.src = at;
  rs.dst = piece;
  rs.counts = sp.counts;
  out.steps.push_back(rs);
  Step ag = on_step(Kind::Allgatherv, level);
  ag.src = piece;
  ag.dst = at;
  ag.counts = sp.counts;
  ag.displs = sp.displs;
  uniform_to_allgather(ag);
  out.steps.push_back(ag);
}

Schedule rs_ar_ag(const topo::Shape& s, int rank, int64_t n, bool in_place, bool ordered) {
  Schedule out;
  out.name = "allreduce/rs-ar-ag";
  const int k = s.nlevels() - 1;
  struct Segment {
    int64_t goff;  // where the segment sits in the full vector
    Split parts;
  };
  std::vector<Segment> segs;
  Ref cur = in_place ? Ref{Buf::Recv, 0} : Ref{Buf::Send, 0};
  int64_t goff = 0, len = n;
  for (int j = 0; j < k; ++j) {
    Segment seg{goff, split_even(len, s.dims[j])};
    const int me = s.coord(rank, j);
    const int64_t part = seg.parts.counts[me], poff = goff + seg.parts.displs[me];
    // A shard goes to its final place in Recv unless the source is in Recv (no aliasing).
    const Ref dst = cur.buf == Buf::Recv ? Ref{Buf::Scratch, 0} : Ref{Buf::Recv, poff};
    if (dst.buf == Buf::Scratch) out.scratch = std::max(out.scratch, part);
    Step rs = on_step(Kind::ReduceScatter, j);
    rs.src = cur;
    rs.dst = dst;
    rs.counts = seg.parts.counts;
    out.steps.push_back(rs);
    segs.push_back(seg);
    cur = dst;
    goff = poff;
    len = part;
  }
  top_level(out, k, s.dims[k], cur, len, ordered);
  for (int j = k - 1; j >= 0; --j) {
    const Segment& seg = segs[j];
    const int me = s.coord(rank, j);
    Step ag = on_step(Kind::Allgatherv, j);
    ag.dst = {Buf::Recv, seg.goff};
    ag.in_place = cur == Ref{Buf::Recv, seg.goff + seg.parts.displs[me]};
    if (!ag.in_place) ag.src = cur;
    ag.counts = seg.parts.counts;
    ag.displs = seg.parts.displs;
    uniform_to_allgather(ag);
    out.steps.push_back(ag);
    cur = ag.dst;
  }
  return out;
}

// Leaders hold the node's partial P (in place: scratch, since no PMPI_Reduce step runs in place:
// see build_reduce.cpp), combine it across nodes into Recv, and bcast it in their node.
Schedule tree(const topo::Shape& s, int rank, int64_t n, bool in_place, bool ordered) {
  Schedule out;
  out.name = "allreduce/tree";
  const bool leader = s.local_of[rank] == 0;
  const Ref recv{Buf::Recv, 0}, A{Buf::Scratch, 0};
  const Ref P = in_place ? A : recv;
  Step red;
  red.kind = Kind::Reduce;
  red.comm = {On::Node, 0};
  red.src = in_place ? recv : Ref{Buf::Send, 0};
  red.dst = P;
  red.count = n;
  red.stage = 0;
  out.steps.push_back(red);
  if (leader) {
    out.scratch = n;
    Step x;
    x.comm = {On::Leaders, 0};
    x.count = n;
    x.stage = 1;
    if (!ordered) {
      x.kind = Kind::Allreduce;
      x.in_place = P == recv;
      x.src = P;
      x.dst = recv;
      out.steps.push_back(x);
    } else {
      // Reduce to the first leader and bcast: one rank computes every element.
      const Ref Q = P == recv ? A : recv;
      x.kind = Kind::Reduce;
      x.src = P;
      x.dst = Q;
      out.steps.push_back(x);
      x.kind = Kind::Bcast;
      x.dst = Q;
      x.stage = 2;
      out.steps.push_back(x);
      if (Q == A) {
        x.kind = Kind::Copy;
        x.comm = {};
        x.src = A;
        x.dst = recv;
        x.stage = 3;
        out.steps.push_back(x);
      }
    }
  }
  Step bc;
  bc.kind = Kind::Bcast;
  bc.comm = {On::Node, 0};
  bc.dst = recv;
  bc.count = n;
  // Stages as the leaders number them: non-leaders skip the middle ones (sched/pipeline.hpp).
  bc.stage = ordered ? 4 : 2;
  out.steps.push_back(bc);
  return out;
}

}  // namespace

Schedule build_allreduce(const topo::Shape& s, int rank, int64_t n, bool in_place, Algorithm a, bool ordered_top) {
  if (a == Algorithm::RsArAg) return rs_ar_ag(s, rank, n, in_place, ordered_top);
  return tree(s, rank, n, in_place, ordered_top);
}

Schedule even_allreduce(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a) {
  (void)unit_bytes;
  return build_allreduce(s, rank, units, false, a, false);
}

}  // namespace hier::sched
