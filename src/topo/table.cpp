#include "topo/table.hpp"

#include <map>
#include <utility>

namespace hier::topo {

GroupTable make_table(int nranks, const std::vector<LevelSpec>& specs) {
  const int L = static_cast<int>(specs.size());
  GroupTable t;
  t.nranks = nranks;
  for (const LevelSpec& s : specs) t.names.push_back(s.name);
  t.ids.assign(static_cast<size_t>(nranks) * L, 0);
  std::vector<int> parent(nranks, 0);  // the world: one group
  for (int j = L - 1; j >= 0; --j) {
    const LevelSpec& s = specs[j];
    std::map<std::pair<int, int>, int> ids;     // (parent id, sub key) -> id
    std::map<int, int> seen;                     // parent id -> members so far (by rank)
    std::vector<int> mine(nranks);
    for (int r = 0; r < nranks; ++r) {
      const int local = seen[parent[r]]++;
      const int sub = s.size > 0 ? local / s.size : s.detected[r];
      auto [it, fresh] = ids.emplace(std::make_pair(parent[r], sub), static_cast<int>(ids.size()));
      mine[r] = it->second;
    }
    for (int r = 0; r < nranks; ++r) t.ids[static_cast<size_t>(r) * L + j] = mine[r];
    parent = std::move(mine);
  }
  return t;
}

// GPU levels are kept also inside a single node: the links between a package's dies and between
// packages differ (an MI250X's two GCDs have 4 links between them, GCDs of different packages 1
// or 2), and the planner still leaves a communicator on one machine flat unless HIER_ALGO=hier
// asks. package / numa only below several nodes: inside one node the MPI's shared memory wins.
GroupTable auto_table(int nranks, const std::map<std::string, std::vector<int>>& detected) {
  const auto node = detected.find("node");
  const LevelSpec node_level{"node", 0, node != detected.end() ? node->second : std::vector<int>(nranks, 0)};
  const bool several_nodes = !analyze(make_table(nranks, {node_level})).names.empty();
  struct Choice {
    std::vector<const char*> inner;  // innermost first
    bool gpu;
  };
  for (const Choice& c : {Choice{{"gcd", "gpu"}, true}, Choice{{"gpu"}, true}, Choice{{"package"}, false},
                          Choice{{"numa"}, false}}) {
    std::vector<LevelSpec> specs;
    for (const char* name : c.inner)
      if (const auto it = detected.find(name); it != detected.end()) specs.push_back({name, 0, it->second});
    if (specs.size() != c.inner.size()) continue;
    specs.push_back(node_level);
    GroupTable t = make_table(nranks, specs);
    const Shape s = analyze(t);
    // Several nodes: the node stays the outermost level (every node split alike).
    const bool nodes_kept = !several_nodes || (!s.names.empty() && s.names.back() == "node");
    if (s.cartesian && nodes_kept && (c.gpu ? s.hierarchical() : s.names.size() == 2)) return t;
  }
  return make_table(nranks, {node_level});
}

}  // namespace hier::topo
