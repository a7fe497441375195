#include "model/shapes.hpp"

namespace hier::model {

topo::Shape cartesian(const std::vector<std::pair<std::string, int>>& levels) {
  topo::GroupTable t;
  int size = 1;
  for (const auto& l : levels) size *= l.second;
  t.nranks = size;
  // The last entry is the world: its groups are implicit.
  for (size_t j = 0; j + 1 < levels.size(); ++j) t.names.push_back(levels[j].first);
  t.ids.resize(static_cast<size_t>(size) * t.names.size());
  for (int r = 0; r < size; ++r) {
    int span = 1;
    for (size_t j = 0; j < t.names.size(); ++j) {
      span *= levels[j].second;
      t.ids[static_cast<size_t>(r) * t.names.size() + j] = r / span;
    }
  }
  return topo::analyze(t);
}

topo::Shape two_level(int nodes, int ranks_per_node) {
  return cartesian({{"node", ranks_per_node}, {"world", nodes}});
}

}  // namespace hier::model
