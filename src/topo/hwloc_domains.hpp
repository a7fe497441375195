// The hardware domain (GPU group, package, NUMA node) this process runs in, from hwloc.
#pragma once

#include <string>

namespace hier::topo {

// An id of the `kind` domain ("gpu", "package", "numa", "socket") this process is bound to,
// equal for processes of one node in the same domain; -1 when unknown: no hwloc, the process
// is not bound inside one domain, or the node has only one such domain (nothing to split).
int local_domain(const std::string& kind);

}  // namespace hier::topo
