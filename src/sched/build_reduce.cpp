// Reduce, the mirror of bcast. rs-reduce-gather (cartesian, large): reduce-scatter in every
// node, each node position reduces its piece across nodes to the root's node, the root gathers
// the pieces. two-step (cartesian, small): every node reduces to the rank at the root's node
// position, those reduce across nodes to the root. tree (any shape): reduce to node leaders,
// leaders reduce to the root node's leader, which hands the result to the root.
//
// No step is an in-place PMPI_Reduce: MPICH 4.0.2 crashes on MPI_IN_PLACE at a root other than
// rank 0 for medium counts (reduce-scatter-gather path), so partial results go to scratch.
#include <algorithm>

#include "sched/build.hpp"

namespace hier::sched {
namespace {

Step reduce(CommRef on, int root, Ref src, Ref dst, int64_t count) {
  Step r;
  r.kind = Kind::Reduce;
  r.comm = on;
  r.root = root;
  r.src = src;
  r.dst = dst;
  r.count = count;
  return r;
}

}  // namespace

Schedule build_reduce(const topo::Shape& s, int rank, int64_t n, int root, bool in_place, Algorithm a) {
  Schedule out;
  const bool is_root = rank == root;
  const bool root_node = s.node_of[rank] == s.node_of[root];
  const Ref input = is_root && in_place ? Ref{Buf::Recv, 0} : Ref{Buf::Send, 0};
  const Ref recv{Buf::Recv, 0}, A{Buf::Scratch, 0}, B{Buf::Scratch, n};
  const int rootnode = s.node_of[root];

  if (a == Algorithm::Tree || !s.cartesian) {
    out.name = "reduce/tree";
    const bool leader = s.local_of[rank] == 0;
    const int rootlocal = s.local_of[root];
    out.steps.push_back(reduce({On::Node, 0}, 0, input, A, n));
    if (!leader) {
      if (is_root) {  // the root node's leader hands the result over
        Step x;
        x.kind = Kind::Recv;
        x.comm = {On::Node, 0};
        x.dst = recv;
        x.root = 0;
        x.count = n;
        out.steps.push_back(x);
      }
      return out;
    }
    out.scratch = n;
    // The root node's leader holds the result: in the root's buffer, or in B to hand it over.
    const Ref result = is_root ? recv : B;
    if (root_node && !is_root) out.scratch = 2 * n;
    out.steps.push_back(reduce({On::Leaders, 0}, rootnode, A, result, n));
    if (root_node && !is_root) {
      Step x;
      x.kind = Kind::Send;
      x.comm = {On::Node, 0};
      x.src = B;
      x.root = rootlocal;
      x.count = n;
      out.steps.push_back(x);
    }
    return out;
  }
  const int me = s.node_position(rank), rootpos = s.node_position(root);
  if (a == Algorithm::TwoStep) {
    out.name = "reduce/two-step";
    out.steps.push_back(reduce({On::Node, 0}, rootpos, input, A, n));
    if (me == rootpos) {
      out.scratch = n;
      out.steps.push_back(reduce({On::Cross, 0}, rootnode, A, recv, n));
    }
    return out;
  }
  out.name = "reduce/rs-reduce-gather";
  int m = 1;
  for (int j = 0; j + 1 < s.nlevels(); ++j) m *= s.dims[j];
  const Split sp = split_even(n, m);
  const int64_t most = *std::max_element(sp.counts.begin(), sp.counts.end());
  const Ref piece_in{Buf::Scratch, 0}, piece_out{Buf::Scratch, most};
  out.scratch = 2 * most;
  Step rs;
  rs.kind = Kind::ReduceScatter;
  rs.comm = {On::Node, 0};
  rs.src = input;
  rs.dst = piece_in;
  rs.counts = sp.counts;
  out.steps.push_back(rs);
  // Across nodes: the root's piece lands in its buffer; its node peers' pieces in scratch.
  const Ref piece = is_root ? Ref{Buf::Recv, sp.displs[me]} : piece_out;
  out.steps.push_back(reduce({On::Cross, 0}, rootnode, piece_in, piece, sp.counts[me]));
  if (root_node) {
    Step g;
    g.kind = Kind::Gatherv;
    g.comm = {On::Node, 0};
    g.root = rootpos;
    g.src = piece_out;
    g.dst = recv;
    g.in_place = is_root;
    g.counts = sp.counts;
    g.displs = sp.displs;
    out.steps.push_back(g);
  }
  return out;
}

Schedule even_reduce(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a) {
  (void)unit_bytes;
  return build_reduce(s, rank, units, 0, false, a);
}

}  // namespace hier::sched
