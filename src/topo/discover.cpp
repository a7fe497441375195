#include "topo/discover.hpp"

#include <atomic>
#include <map>
#include <vector>

#include "diag/log.hpp"
#include "topo/hwloc_domains.hpp"
#include "topo/table.hpp"

namespace hier::topo {
namespace {

// Lowest rank (in `comm`) of the ranks that share memory with this one: the node's id.
int shared_memory_node_id(MPI_Comm comm, int rank) {
  MPI_Comm node = MPI_COMM_NULL;
  if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS) return rank;
  int id = rank;
  PMPI_Allreduce(&rank, &id, 1, MPI_INT, MPI_MIN, node);
  PMPI_Comm_free(&node);
  return id;
}

// The levels whose groups must be detected, and what every rank detected for them, gathered
// once: every later decision is made from this same table on every rank.
struct Detected {
  std::vector<std::string> names;
  std::vector<std::vector<int>> ids;  // [level][rank]; -1 = unknown on that rank
  bool known(size_t l) const {
    for (int v : ids[l])
      if (v < 0) return false;
    return true;
  }
};

Detected detect(MPI_Comm comm, int rank, int size, const std::vector<std::string>& names) {
  Detected d{names, {}};
  std::vector<int> mine;
  for (const std::string& n : names) mine.push_back(n == "node" ? shared_memory_node_id(comm, rank) : local_domain(n));
  const int nd = static_cast<int>(mine.size());
  std::vector<int> all(static_cast<size_t>(nd) * size);
  if (nd > 0) PMPI_Allgather(mine.data(), nd, MPI_INT, all.data(), nd, MPI_INT, comm);
  d.ids.assign(nd, std::vector<int>(size));
  for (int r = 0; r < size; ++r)
    for (int l = 0; l < nd; ++l) d.ids[l][r] = all[static_cast<size_t>(r) * nd + l];
  return d;
}

const std::vector<int>* ids_of(const Detected& d, const std::string& name) {
  for (size_t l = 0; l < d.names.size(); ++l)
    if (d.names[l] == name) return d.known(l) ? &d.ids[l] : nullptr;
  return nullptr;
}

}  // namespace

GroupTable discover(MPI_Comm comm, const config::Config& cfg, bool physical) {
  int rank = 0, size = 1;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  auto with_physical = [&](GroupTable t, const Detected& d) {
    if (const std::vector<int>* node = physical ? ids_of(d, "node") : nullptr) t.physical = *node;
    return t;
  };

  if (cfg.levels_auto) {
    const Detected d = detect(comm, rank, size, {"gcd", "gpu", "package", "numa", "node"});
    std::map<std::string, std::vector<int>> known;
    for (const std::string& name : d.names)
      if (const std::vector<int>* ids = ids_of(d, name)) known[name] = *ids;
    return with_physical(auto_table(size, known), d);
  }

  std::vector<std::string> unsized;
  bool has_node = false;
  for (const config::Level& l : cfg.levels) {
    if (l.size == 0) unsized.push_back(l.name);
    has_node |= l.size == 0 && l.name == "node";
  }
  if (physical && !has_node) unsized.push_back("node");  // detected, not a level
  const Detected d = detect(comm, rank, size, unsized);
  std::vector<LevelSpec> specs;
  for (const config::Level& l : cfg.levels) {
    if (l.size > 0) {
      specs.push_back({l.name, l.size, {}});
    } else if (const std::vector<int>* ids = ids_of(d, l.name)) {
      specs.push_back({l.name, 0, *ids});
    } else {
      static std::atomic<bool> warned{false};
      if (rank == 0 && !warned.exchange(true))
        HIER_WARN("topo", "HIER_LEVELS: level '%s' has no size and was not found on this machine; it is ignored",
                  l.name.c_str());
    }
  }
  return with_physical(make_table(size, specs), d);
}

}  // namespace hier::topo
