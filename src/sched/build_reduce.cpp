// Reduce, the mirror of bcast. rs-reduce-gather (cartesian, large): reduce-scatter in every
// node, each node position reduces its piece across nodes to the root's node, the root gathers
// the pieces. two-step (cartesian, small): every node reduces to the rank at the root's node
// position, those reduce across nodes to the root. tree (any shape): reduce to node leaders,
// leaders reduce to the root node's leader, which hands the result to the root.
#include <algorithm>

#include "sched/build.hpp"

namespace hier::sched {
namespace {

Step reduce(CommRef on, int root, Ref src, Ref dst, bool in_place, int64_t count) {
  Step r;
  r.kind = Kind::Reduce;
  r.comm = on;
  r.root = root;
  r.src = src;
  r.dst = dst;
  r.in_place = in_place;
  r.count = count;
  return r;
}

}  // namespace

Schedule build_reduce(const topo::Shape& s, int rank, int64_t n, int root, bool in_place, Algorithm a) {
  Schedule out;
  const bool is_root = rank == root;
  const bool root_node = s.node_of[rank] == s.node_of[root];
  const Ref input = is_root && in_place ? Ref{Buf::Recv, 0} : Ref{Buf::Send, 0};
  const Ref recv{Buf::Recv, 0}, scratch{Buf::Scratch, 0};
  const int rootnode = s.node_of[root];

  if (a == Algorithm::Tree || !s.cartesian) {
    out.name = "reduce/tree";
    const bool leader = s.local_of[rank] == 0;
    const int rootlocal = s.local_of[root];
    // The leader's partial result: the root's buffer when the root leads, scratch otherwise.
    const Ref partial = leader && is_root ? recv : scratch;
    if (leader && !is_root) out.scratch = n;
    out.steps.push_back(reduce({On::Node, 0}, 0, input, partial, leader && is_root && in_place, n));
    if (leader) out.steps.push_back(reduce({On::Leaders, 0}, rootnode, partial, partial, root_node, n));
    if (root_node && rootlocal != 0) {
      Step x;
      x.comm = {On::Node, 0};
      x.count = n;
      if (leader) {
        x.kind = Kind::Send;
        x.src = scratch;
        x.root = rootlocal;
        out.steps.push_back(x);
      } else if (is_root) {
        x.kind = Kind::Recv;
        x.dst = recv;
        x.root = 0;
        out.steps.push_back(x);
      }
    }
    return out;
  }

  const int me = s.node_position(rank), rootpos = s.node_position(root);
  if (a == Algorithm::TwoStep) {
    out.name = "reduce/two-step";
    const Ref partial = is_root ? recv : scratch;
    if (me == rootpos && !is_root) out.scratch = n;
    out.steps.push_back(reduce({On::Node, 0}, rootpos, input, partial, is_root && in_place, n));
    if (me == rootpos) out.steps.push_back(reduce({On::Cross, 0}, rootnode, partial, partial, is_root, n));
    return out;
  }
  out.name = "reduce/rs-reduce-gather";
  int m = 1;
  for (int j = 0; j + 1 < s.nlevels(); ++j) m *= s.dims[j];
  const Split sp = split_even(n, m);
  out.scratch = *std::max_element(sp.counts.begin(), sp.counts.end());
  Step rs;
  rs.kind = Kind::ReduceScatter;
  rs.comm = {On::Node, 0};
  rs.src = input;
  rs.dst = scratch;
  rs.counts = sp.counts;
  out.steps.push_back(rs);
  // Across nodes: the root's piece lands in place in its buffer; its node peers reduce in place
  // in scratch (they are the roots of their cross communicators).
  const Ref piece = is_root ? Ref{Buf::Recv, sp.displs[me]} : scratch;
  out.steps.push_back(reduce({On::Cross, 0}, rootnode, scratch, piece, root_node && !is_root, sp.counts[me]));
  if (root_node) {
    Step g;
    g.kind = Kind::Gatherv;
    g.comm = {On::Node, 0};
    g.root = rootpos;
    g.src = scratch;
    g.dst = recv;
    g.in_place = is_root;
    g.counts = sp.counts;
    g.displs = sp.displs;
    out.steps.push_back(g);
  }
  return out;
}

}  // namespace hier::sched
