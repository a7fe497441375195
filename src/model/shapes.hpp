// Shapes without MPI: a cartesian hierarchy from its sizes, for the planner's probes, hier-sim
// and the tests (the same topo::analyze the library runs on the allgathered table).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "topo/shape.hpp"

namespace hier::model {

// `levels`: innermost first, each a name and how many groups of the level below (ranks, for the
// first) one group holds; the last is the number of nodes. E.g. {{"gpu", 2}, {"node", 4}, {"world", 2}}:
// 2 nodes of 4 packages of 2 ranks. Ranks are numbered group by group.
topo::Shape cartesian(const std::vector<std::pair<std::string, int>>& levels);
// `nodes` nodes of `ranks_per_node` ranks.
topo::Shape two_level(int nodes, int ranks_per_node);

}  // namespace hier::model
