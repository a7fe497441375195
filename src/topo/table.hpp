// From the configured levels to a GroupTable: pure (no MPI), unit-tested.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "topo/shape.hpp"

namespace hier::topo {

// One configured level, innermost first. size > 0: groups of `size` consecutive ranks of the
// enclosing level (node:N fakes nodes of N consecutive ranks of the communicator; gpu:2 inside
// node makes pairs of node-local ranks). size == 0: `detected` holds, per rank, an id that
// discovery found (shared-memory node, hwloc package...).
struct LevelSpec {
  std::string name;
  int size = 0;
  std::vector<int> detected;
};

// Groups are computed outermost first so that every level nests inside the one above it
// (a detected level is intersected with its parent's groups).
GroupTable make_table(int nranks, const std::vector<LevelSpec>& specs);

// HIER_LEVELS=auto from what discovery found: `detected` maps the names of the domains known on
// every rank (node, gcd, gpu, package, numa) to every rank's id; without "node", one node.
// The node, and inside it either the GPU levels (gcd inside gpu, or gpu alone) where they split
// every node alike, or else the first of package / numa that does, below several nodes only.
GroupTable auto_table(int nranks, const std::map<std::string, std::vector<int>>& detected);

}  // namespace hier::topo
