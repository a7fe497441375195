// The hardware domain (GPU group, package, NUMA node) this process runs in, from hwloc.
#pragma once

#include <string>
#include <utility>
#include <vector>

#if defined(HIER_HAVE_HWLOC)
#include <hwloc.h>
#endif

namespace hier::topo {

// An id of the `kind` domain ("gcd", "gpu", "package", "numa", "socket") this process is in,
// equal for processes of one node in the same domain; -1 when unknown: no hwloc, the process
// is not bound inside one domain, or the node has only one such domain (nothing to split).
// gcd and gpu come from the one device the process sees (topo/gpu_locality.hpp).
// The topology is loaded once per process (lazily); docs/collectives.md, "Levels", has the rules.
int local_domain(const std::string& kind);

// --- The pure parts, exposed for the unit tests (tests/unit/hwloc_domains_test.cpp). ---

// The one device this process sees, from the runtimes' variables (each may be null = unset):
// ROCR_VISIBLE_DEVICES lists physical ids; HIP_VISIBLE_DEVICES (or, when unset,
// CUDA_VISIBLE_DEVICES) selects among them (indices into ROCR's list when that is set,
// physical ids otherwise). -1 unless exactly one device results and every id used is a
// plain non-negative integer (UUIDs, MIG names, empty lists: unsure).
int visible_gpu(const char* rocr, const char* hip, const char* cuda);

// GPU devices per package, from the (PCI vendor, device) ids of the node's GPUs: 2 when every
// GPU is an AMD MI250X / MI250 GCD (0x1002:0x7408, 0x1002:0x740c: two GCDs per package), 1 for
// any other non-empty list (one device = one package), -1 for no GPU.
int gpus_per_package(const std::vector<std::pair<unsigned, unsigned>>& pci_ids);

// The gpu domain id: the visible device's package, device / per_package; -1 if either is unknown.
int gpu_package(int device, int per_package);

#if defined(HIER_HAVE_HWLOC)
// Logical index of the one object of `type` (package, NUMA node) whose cpuset contains all of
// `binding` (clipped to the topology's PUs); -1 when the binding is empty, spans several such
// objects, or the topology has fewer than two of them.
int domain_of_cpuset(hwloc_topology_t topology, hwloc_const_cpuset_t binding, hwloc_obj_type_t type);
#endif

}  // namespace hier::topo
