// From the configured levels to a GroupTable: pure (no MPI), unit-tested.
#pragma once

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

}  // namespace hier::topo
