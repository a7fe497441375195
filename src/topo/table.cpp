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

}  // namespace hier::topo
