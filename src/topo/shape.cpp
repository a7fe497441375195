#include "topo/shape.hpp"

#include <algorithm>
#include <map>
#include <sstream>

namespace hier::topo {
namespace {

// Groups of one level: members sorted by rank, groups ordered by their lowest rank.
struct Level {
  std::vector<std::vector<int>> groups;
  std::vector<int> group_of;  // rank -> group index
};

Level level_groups(const GroupTable& t, int level) {
  Level l;
  l.group_of.assign(t.nranks, -1);
  std::map<int, int> index;  // id -> group index, in order of first (lowest) rank
  for (int r = 0; r < t.nranks; ++r) {
    auto [it, fresh] = index.emplace(t.at(r, level), static_cast<int>(l.groups.size()));
    if (fresh) l.groups.emplace_back();
    l.groups[it->second].push_back(r);
    l.group_of[r] = it->second;
  }
  return l;
}

int index_in(const std::vector<int>& v, int x) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == x) return static_cast<int>(i);
  return -1;
}

}  // namespace

int Shape::node_position(int rank) const {
  const int k = nlevels() - 1;
  int pos = 0;
  for (int j = 0; j < k; ++j) pos = pos * dims[j] + coord(rank, j);
  return pos;
}

Shape analyze(const GroupTable& t) {
  Shape s;
  s.size = t.nranks;
  if (!t.physical.empty()) {
    s.one_machine = true;
    for (int v : t.physical) s.one_machine &= v == t.physical.front();
  }
  const int L = static_cast<int>(t.names.size());
  if (t.nranks <= 0) return s;
  std::vector<Level> all;
  for (int j = 0; j < L; ++j) all.push_back(level_groups(t, j));
  // Nesting: the members of a group share their group one level up.
  for (int j = 0; j + 1 < L; ++j)
    for (const auto& g : all[j].groups)
      for (int r : g)
        if (all[j + 1].group_of[r] != all[j + 1].group_of[g.front()]) {
          s.nested = false;
          return s;
        }
  // Keep the levels that split something the level inside them did not.
  std::vector<const Level*> kept;
  size_t inner_count = static_cast<size_t>(t.nranks);
  for (int j = 0; j < L; ++j) {
    const size_t n = all[j].groups.size();
    if (n > 1 && n < inner_count) {
      kept.push_back(&all[j]);
      s.names.push_back(t.names[j]);
      inner_count = n;
    } else if (n > 1 && n == inner_count && !kept.empty()) {
      s.names.back() = t.names[j];  // the same groups: the outer (broader) name describes them
    }
  }
  if (kept.empty()) return s;

  // Two-level view: the outermost kept level is the node.
  const Level& node = *kept.back();
  s.nnodes = static_cast<int>(node.groups.size());
  s.node_of = node.group_of;
  s.local_of.assign(t.nranks, 0);
  s.consecutive = true;
  for (const auto& g : node.groups) {
    s.node_sizes.push_back(static_cast<int>(g.size()));
    s.node_first.push_back(g.front());
    for (size_t i = 0; i < g.size(); ++i) {
      s.local_of[g[i]] = static_cast<int>(i);
      if (g[i] != g.front() + static_cast<int>(i)) s.consecutive = false;
    }
  }

  // Cartesian view: equal fan-out at every level.
  const int k = static_cast<int>(kept.size());
  std::vector<int> dims(k + 1);
  dims[0] = static_cast<int>(kept[0]->groups[0].size());
  for (const auto& g : kept[0]->groups)
    if (static_cast<int>(g.size()) != dims[0]) return s;
  // children[j][g]: the level j-1 groups inside level j group g, ordered by lowest rank.
  std::vector<std::vector<std::vector<int>>> children(k);
  for (int j = 1; j < k; ++j) {
    children[j].assign(kept[j]->groups.size(), {});
    for (size_t c = 0; c < kept[j - 1]->groups.size(); ++c)
      children[j][kept[j]->group_of[kept[j - 1]->groups[c].front()]].push_back(static_cast<int>(c));
    dims[j] = static_cast<int>(children[j][0].size());
    for (const auto& ch : children[j])
      if (static_cast<int>(ch.size()) != dims[j]) return s;
  }
  dims[k] = s.nnodes;
  s.cartesian = true;
  s.dims = dims;
  s.coords.assign(static_cast<size_t>(t.nranks) * (k + 1), 0);
  s.rank_at.assign(t.nranks, -1);
  s.position_of.assign(t.nranks, -1);
  for (int r = 0; r < t.nranks; ++r) {
    int* c = &s.coords[static_cast<size_t>(r) * (k + 1)];
    c[0] = index_in(kept[0]->groups[kept[0]->group_of[r]], r);
    for (int j = 1; j < k; ++j) c[j] = index_in(children[j][kept[j]->group_of[r]], kept[j - 1]->group_of[r]);
    c[k] = node.group_of[r];
    int pos = 0;
    for (int j = 0; j <= k; ++j) pos = pos * dims[j] + c[j];
    s.position_of[r] = pos;
    s.rank_at[pos] = r;
  }
  // The node communicator orders a cartesian node by position (c_0 most significant).
  for (int r = 0; r < t.nranks; ++r) s.local_of[r] = s.node_position(r);
  return s;
}

std::vector<int> Shape::members(int rank, Comm which, int level) const {
  std::vector<std::pair<int, int>> keyed;  // (rank in the level communicator, rank)
  if (which == Comm::Leaders && local_of[rank] != 0) return {};
  if ((which == Comm::Step || which == Comm::Cross) && !cartesian) return {};
  for (int r = 0; r < size; ++r) {
    switch (which) {
      case Comm::Step: {
        bool same = true;
        for (int j = 0; j < nlevels() && same; ++j) same = j == level || coord(r, j) == coord(rank, j);
        if (same) keyed.push_back({coord(r, level), r});
        break;
      }
      case Comm::Node:
        if (node_of[r] == node_of[rank]) keyed.push_back({local_of[r], r});
        break;
      case Comm::Cross:
        if (local_of[r] == local_of[rank]) keyed.push_back({node_of[r], r});
        break;
      case Comm::Leaders:
        if (local_of[r] == 0) keyed.push_back({node_of[r], r});
        break;
    }
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<int> m;
  for (const auto& k : keyed) m.push_back(k.second);
  return m;
}

bool Shape::inside_node(Comm which, int level) const {
  if (which == Comm::Node) return true;
  return which == Comm::Step && cartesian && level < nlevels() - 1;
}

std::string Shape::describe() const {
  std::ostringstream o;
  if (!nested) return "not nested (flat)";
  if (names.empty()) return "one level (flat)";
  if (cartesian) {
    for (size_t j = 0; j < names.size(); ++j) o << names[j] << ':' << dims[j] << " x ";
    o << "world:" << dims.back() << " (cartesian" << (consecutive ? ", consecutive" : ", scattered") << ")";
  } else {
    o << names.back() << " sizes ";
    for (int i = 0; i < nnodes; ++i) o << (i ? "," : "") << node_sizes[i];
    o << " (uneven: two-level tree only)";
  }
  if (one_machine) o << " on one machine";
  return o.str();
}

}  // namespace hier::topo
