// The shape of a hierarchy, computed from one table of group ids: pure data, no MPI, so the
// decisions it drives (cartesian or not, coordinates, orders) are unit-testable and, computed
// from the same allgathered table on every rank, identical on every rank.
#pragma once

#include <string>
#include <vector>

namespace hier::topo {

// For every rank of a communicator, the group it belongs to at each level, innermost first.
// Ids are arbitrary ints, equal for members of one group (and nested: see make_table).
struct GroupTable {
  int nranks = 0;
  std::vector<std::string> names;  // level names, innermost first (world is implicit)
  std::vector<int> ids;            // ids[rank * names.size() + level]
  // Per rank, its shared-memory domain (physical node) where discovery looked; empty if not.
  std::vector<int> physical;
  int at(int rank, int level) const { return ids[static_cast<size_t>(rank) * names.size() + level]; }
};

struct Shape {
  int size = 0;
  std::vector<std::string> names;  // levels that split the ranks, innermost first (world excluded)
  bool nested = true;              // every group lies inside one group of the level above
  // Whether any level remains: with none, there is nothing hierarchical to do.
  bool hierarchical() const { return nested && !names.empty(); }

  // Two-level view (any nesting, even uneven): the outermost listed level is the "node".
  int nnodes = 0;
  std::vector<int> node_of;     // rank -> node index (nodes ordered by lowest rank)
  std::vector<int> local_of;    // rank -> rank in its node communicator (by rank; cartesian: by position)
  std::vector<int> node_sizes;  // node index -> ranks
  std::vector<int> node_first;  // node index -> lowest rank (its leader)

  // Cartesian view: every group at every level has the same number of children.
  bool cartesian = false;
  std::vector<int> dims;         // s_0..s_k: s_0 ranks per innermost group, s_k = nnodes
  std::vector<int> coords;       // coords[rank * (k+1) + j] = c_j
  std::vector<int> rank_at;      // hierarchical position -> rank (position: c_0 most significant)
  std::vector<int> position_of;  // rank -> hierarchical position
  bool consecutive = false;      // every node holds consecutive ranks
  // Every rank shares memory with every other (node:N fakes on one machine): the levels cross
  // nothing slower than shared memory. Known only where discovery looked (GroupTable::physical).
  bool one_machine = false;

  int nlevels() const { return static_cast<int>(dims.size()); }  // k+1 (cartesian only)
  int coord(int rank, int j) const { return coords[static_cast<size_t>(rank) * dims.size() + j]; }
  // Position of a rank inside its node, c_0 most significant (cartesian only).
  int node_position(int rank) const;
  // E.g. "gpu:2 x node:2 x world:2 (cartesian, consecutive)" or "node sizes 3,3,1 (uneven...)".
  std::string describe() const;

  // The members of a level communicator of `rank`, in their communicator's rank order; empty
  // where `rank` is not a member. The one definition of the level communicators: topo builds
  // them from it and the schedule simulator of the tests uses it.
  enum class Comm { Step, Node, Cross, Leaders };
  std::vector<int> members(int rank, Comm which, int level = 0) const;
  // Whether a level communicator lies inside one node: the node communicator, and every
  // cartesian step level but the outermost (which crosses the nodes). The one rule of which
  // levels get a shared segment (HIER_SHM: topo::build_levels attaches them, the executor and
  // the planner route through them, sched::route_shm); a level across nodes never does, even
  // where all its members share memory (HIER_LEVELS fakes on one machine), so that the planner
  // costs what runs and a one-host test runs what a cluster runs.
  bool inside_node(Comm which, int level = 0) const;
};

// Reduces the table to the levels that matter (drops levels that split nothing or repeat the
// level inside them), checks nesting, and computes both views.
Shape analyze(const GroupTable& table);

}  // namespace hier::topo
