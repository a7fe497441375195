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
    bool even = true;
    for (int64_t c : ag.counts) even &= c == ag.counts[0];
    if (even) {
      ag.kind = Kind::Allgather;
      ag.count = ag.counts[0];
      ag.counts.clear();
      ag.displs.clear();
    }
    out.steps.push_back(ag);
    cur = ag.dst;
  }
  return out;
}

Schedule tree(const topo::Shape& s, int rank, int64_t n, bool in_place, bool ordered) {
  Schedule out;
  out.name = "allreduce/tree";
  const bool leader = s.local_of[rank] == 0;
  Step red;
  red.kind = Kind::Reduce;
  red.comm = {On::Node, 0};
  red.root = 0;
  red.count = n;
  red.src = in_place ? Ref{Buf::Recv, 0} : Ref{Buf::Send, 0};
  red.dst = {Buf::Recv, 0};
  red.in_place = leader && in_place;
  out.steps.push_back(red);
  if (leader) {
    // ordered: reduce to the first leader and bcast, so one rank computes every element.
    Step ar;
    ar.kind = ordered ? Kind::Reduce : Kind::Allreduce;
    ar.comm = {On::Leaders, 0};
    ar.in_place = ordered ? s.node_of[rank] == 0 : true;
    ar.src = {Buf::Recv, 0};
    ar.dst = {Buf::Recv, 0};
    ar.count = n;
    out.steps.push_back(ar);
    if (ordered) {
      Step bc;
      bc.kind = Kind::Bcast;
      bc.comm = {On::Leaders, 0};
      bc.dst = {Buf::Recv, 0};
      bc.count = n;
      out.steps.push_back(bc);
    }
  }
  Step bc;
  bc.kind = Kind::Bcast;
  bc.comm = {On::Node, 0};
  bc.root = 0;
  bc.dst = {Buf::Recv, 0};
  bc.count = n;
  out.steps.push_back(bc);
  return out;
}

}  // namespace

Schedule build_allreduce(const topo::Shape& s, int rank, int64_t n, bool in_place, Algorithm a, bool ordered_top) {
  if (a == Algorithm::RsArAg) return rs_ar_ag(s, rank, n, in_place, ordered_top);
  return tree(s, rank, n, in_place, ordered_top);
}

}  // namespace hier::sched
