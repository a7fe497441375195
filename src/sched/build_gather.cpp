// Gather and scatter, in bytes, through the node leaders (any shape, uneven nodes included).
// gather: every node gathers its ranks' blocks to its leader, the leaders gather the nodes' runs
// to the root node's leader, which hands the whole to the root (when the root is not the leader);
// the root stores each block where the user's receive buffer wants it. scatter: the mirror.
//
// Scratch holds the blocks in node order (node 0's ranks by local rank, then node 1's, ...), the
// order the level communicators deliver them in; the user's order (by rank) may differ (nodes of
// interleaved ranks), so the root moves the blocks one by one between scratch and the user's
// buffer (LoadBlock / StoreBlock), which also packs or unpacks a non-contiguous datatype there.
#include "sched/build.hpp"

namespace hier::sched {
namespace {

// Where a node's run of blocks starts in scratch (in blocks), for every node.
std::vector<int64_t> node_offsets(const topo::Shape& s) {
  std::vector<int64_t> off(static_cast<size_t>(s.nnodes), 0);
  for (int k = 1; k < s.nnodes; ++k) off[k] = off[k - 1] + s.node_sizes[k - 1];
  return off;
}

// A Gatherv or Scatterv step over `members` pieces of the given sizes, contiguous from 0.
Step rooted_v(Kind kind, CommRef on, int root, const std::vector<int64_t>& sizes, int stage) {
  Step st;
  st.kind = kind;
  st.comm = on;
  st.root = root;
  st.stage = stage;
  int64_t at = 0;
  for (int64_t n : sizes) {
    st.counts.push_back(n);
    st.displs.push_back(at);
    at += n;
  }
  return st;
}

// What both directions share for `rank`: where its node's run sits in its scratch, how much
// scratch it needs (the root and the root node's leader: every block; another leader: its
// node's run), and the leaders' step over the nodes' runs (src / dst: scratch from 0).
struct Tree {
  Tree(const topo::Shape& s, int rank, int64_t b, int root)
      : node(s.node_of[rank]), rootnode(s.node_of[root]), leader(s.local_of[rank] == 0), all(b * s.size),
        mine(node == rootnode ? node_offsets(s)[node] * b : 0) {}
  int64_t scratch(const topo::Shape& s, int rank, int root, int64_t b) const {
    if (rank == root || (leader && node == rootnode)) return all;
    return leader ? s.node_sizes[node] * b : 0;
  }
  Step leaders(Kind kind, const topo::Shape& s, int64_t b, int stage) const {
    std::vector<int64_t> runs;
    for (int n : s.node_sizes) runs.push_back(n * b);
    Step st = rooted_v(kind, {On::Leaders, 0}, rootnode, runs, stage);
    st.src = st.dst = {Buf::Scratch, 0};
    st.in_place = node == rootnode;  // the root node's run is already (or stays) in its place
    return st;
  }
  Step in_node(Kind kind, const topo::Shape& s, int64_t b, int stage) const {
    return rooted_v(kind, {On::Node, 0}, 0, std::vector<int64_t>(s.node_sizes[node], b), stage);
  }
  int node, rootnode;
  bool leader;
  int64_t all, mine;
};

Step hand_over(Kind kind, Ref buf, int peer, int64_t bytes, int stage) {
  Step x;
  x.kind = kind;
  x.comm = {On::Node, 0};
  (kind == Kind::Send ? x.src : x.dst) = buf;
  x.root = peer;
  x.count = bytes;
  x.stage = stage;
  return x;
}

// The root's moves between scratch (node order) and the user's blocks (rank order).
void user_blocks(Schedule& out, const topo::Shape& s, Kind kind, int64_t b, int stage) {
  const std::vector<int64_t> off = node_offsets(s);
  for (int r = 0; r < s.size; ++r) {
    Step x;
    x.kind = kind;
    x.block = r;
    x.count = b;
    const Ref at{Buf::Scratch, (off[s.node_of[r]] + s.local_of[r]) * b};
    (kind == Kind::StoreBlock ? x.src : x.dst) = at;
    x.stage = stage;
    out.steps.push_back(x);
  }
}

}  // namespace

Schedule build_gather(const topo::Shape& s, int rank, int64_t b, int root) {
  Schedule out;
  out.name = "gather/tree";
  out.unit = Unit::Bytes;
  const Tree t(s, rank, b, root);
  out.scratch = t.scratch(s, rank, root, b);
  Step g = t.in_node(Kind::Gatherv, s, b, 0);
  g.src = {Buf::Send, 0};
  g.dst = {Buf::Scratch, t.mine};
  out.steps.push_back(g);
  if (t.leader) out.steps.push_back(t.leaders(Kind::Gatherv, s, b, 1));
  if (t.node == t.rootnode && s.local_of[root] != 0) {  // the leader hands everything to the root
    if (t.leader) out.steps.push_back(hand_over(Kind::Send, {Buf::Scratch, 0}, s.local_of[root], t.all, 2));
    if (rank == root) out.steps.push_back(hand_over(Kind::Recv, {Buf::Scratch, 0}, 0, t.all, 2));
  }
  if (rank == root) user_blocks(out, s, Kind::StoreBlock, b, 3);
  return out;
}

Schedule build_scatter(const topo::Shape& s, int rank, int64_t b, int root, bool in_place) {
  Schedule out;
  out.name = "scatter/tree";
  out.unit = Unit::Bytes;
  out.writes_recv = true;
  const Tree t(s, rank, b, root);
  out.scratch = t.scratch(s, rank, root, b);
  if (rank == root) user_blocks(out, s, Kind::LoadBlock, b, 0);
  if (t.node == t.rootnode && s.local_of[root] != 0) {  // the root hands everything to its leader
    if (rank == root) out.steps.push_back(hand_over(Kind::Send, {Buf::Scratch, 0}, 0, t.all, 1));
    if (t.leader) out.steps.push_back(hand_over(Kind::Recv, {Buf::Scratch, 0}, s.local_of[root], t.all, 1));
  }
  if (t.leader) out.steps.push_back(t.leaders(Kind::Scatterv, s, b, 2));
  Step sc = t.in_node(Kind::Scatterv, s, b, 3);
  sc.src = {Buf::Scratch, t.mine};
  // The root in place keeps its block in its send buffer: a leader takes no piece, another root
  // takes its piece into scratch (the user passed no receive buffer).
  sc.dst = rank == root && in_place ? Ref{Buf::Scratch, 0} : Ref{Buf::Recv, 0};
  sc.in_place = rank == root && in_place && t.leader;
  out.steps.push_back(sc);
  return out;
}

Schedule even_gather(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a) {
  (void)a;
  return build_gather(s, rank, units * unit_bytes / s.size, 0);
}

Schedule even_scatter(const topo::Shape& s, int rank, int64_t units, int64_t unit_bytes, Algorithm a) {
  (void)a;
  return build_scatter(s, rank, units * unit_bytes / s.size, 0, false);
}

}  // namespace hier::sched
