// hier-tune's view of the job's nodes: libhier's own discovery (topo::discover, the "node" level:
// ranks sharing memory, MPI_COMM_TYPE_SHARED), so that hier-tune measures the nodes libhier's
// levels will be built on.
#include <algorithm>
#include <map>

#include "config/config.hpp"
#include "measure.hpp"
#include "topo/discover.hpp"

namespace hier::tune {

Shape shape() {
  Shape s;
  PMPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &s.size);
  MPI_Comm dup = MPI_COMM_NULL;  // discovery's traffic on a communicator of its own
  PMPI_Comm_dup(MPI_COMM_WORLD, &dup);
  config::Config cfg = config::get();
  cfg.levels_auto = false;
  cfg.levels = {config::Level{"node", 0}};
  const topo::GroupTable t = topo::discover(dup, cfg, /*physical=*/true);
  PMPI_Comm_free(&dup);
  // Nodes numbered by their lowest rank; members by rank (the same on every rank: one table).
  std::map<int, int> index;  // node id -> node index
  std::vector<int> sizes;
  std::vector<int> node(s.size), local(s.size);
  for (int r = 0; r < s.size; ++r) {
    const int id = t.physical.empty() ? t.at(r, 0) : t.physical[static_cast<size_t>(r)];
    auto [it, added] = index.emplace(id, static_cast<int>(sizes.size()));
    if (added) sizes.push_back(0);
    node[r] = it->second;
    local[r] = sizes[static_cast<size_t>(it->second)]++;
  }
  s.nodes = static_cast<int>(sizes.size());
  s.node = node[s.rank];
  s.local = local[s.rank];
  s.ppn = sizes[static_cast<size_t>(s.node)];
  s.uniform = std::all_of(sizes.begin(), sizes.end(), [&](int n) { return n == sizes[0]; });
  PMPI_Comm_split(MPI_COMM_WORLD, s.node, s.local, &s.node_comm);
  return s;
}

RankMap rank_map(const Shape& s) {
  RankMap m;
  m.node.resize(s.size);
  m.local.resize(s.size);
  PMPI_Allgather(&s.node, 1, MPI_INT, m.node.data(), 1, MPI_INT, MPI_COMM_WORLD);
  PMPI_Allgather(&s.local, 1, MPI_INT, m.local.data(), 1, MPI_INT, MPI_COMM_WORLD);
  return m;
}

}  // namespace hier::tune
