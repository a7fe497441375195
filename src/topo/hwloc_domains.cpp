#include "topo/hwloc_domains.hpp"

namespace hier::topo {

// Without hwloc (HIER_WITH_HWLOC off) no domain is known; auto levels are then just the node.
int local_domain(const std::string&) { return -1; }

}  // namespace hier::topo
