#include "topo/hwloc_domains.hpp"

#include <cstdlib>

#include "topo/gpu_locality.hpp"

namespace hier::topo {
namespace {

// A comma-separated list of plain non-negative integers ("" = the empty list); false for
// anything else (UUIDs such as GPU-..., MIG-..., signs, spaces, overflow).
bool parse_ids(const char* s, std::vector<int>& out) {
  out.clear();
  if (*s == '\0') return true;
  for (;;) {
    long v = 0;
    const char* start = s;
    while (*s >= '0' && *s <= '9') {
      v = v * 10 + (*s++ - '0');
      if (v > 1 << 20) return false;
    }
    if (s == start) return false;
    out.push_back(static_cast<int>(v));
    if (*s == '\0') return true;
    if (*s++ != ',') return false;
  }
}

}  // namespace

int visible_gpu(const char* rocr, const char* hip, const char* cuda) {
  const char* select = hip ? hip : cuda;
  std::vector<int> r, s;
  if (rocr && !parse_ids(rocr, r)) return -1;
  if (select && !parse_ids(select, s)) return -1;
  if (rocr) {
    if (!select) return r.size() == 1 ? r[0] : -1;
    return s.size() == 1 && static_cast<size_t>(s[0]) < r.size() ? r[s[0]] : -1;
  }
  return select && s.size() == 1 ? s[0] : -1;
}

int gpus_per_package(const std::vector<std::pair<unsigned, unsigned>>& pci_ids) {
  if (pci_ids.empty()) return -1;
  for (const auto& [vendor, device] : pci_ids)
    if (vendor != 0x1002 || (device != 0x7408 && device != 0x740c)) return 1;
  return 2;
}

int gpu_package(int device, int per_package) {
  return device >= 0 && per_package > 0 ? device / per_package : -1;
}

#if defined(HIER_HAVE_HWLOC)

int domain_of_cpuset(hwloc_topology_t topology, hwloc_const_cpuset_t binding, hwloc_obj_type_t type) {
  if (!topology || !binding) return -1;
  const int n = hwloc_get_nbobjs_by_type(topology, type);
  if (n < 2) return -1;  // one domain (nothing to split), or none / several depths
  hwloc_bitmap_t set = hwloc_bitmap_dup(binding);
  if (!set) return -1;
  hwloc_bitmap_and(set, set, hwloc_topology_get_topology_cpuset(topology));
  int found = -1;
  if (!hwloc_bitmap_iszero(set)) {
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t o = hwloc_get_obj_by_type(topology, type, static_cast<unsigned>(i));
      if (o && o->cpuset && hwloc_bitmap_isincluded(set, o->cpuset)) {
        found = static_cast<int>(o->logical_index);
        break;
      }
    }
  }
  hwloc_bitmap_free(set);
  return found;
}

namespace {

// The whole machine, disallowed PUs included, so that logical indices are the same in every
// process of the node even when each runs in its own cgroup. Caches are not needed; PCI devices
// only for the GPU probe.
hwloc_topology_t load_topology(bool pci) {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) return nullptr;
  hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  hwloc_topology_set_cache_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_icache_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_io_types_filter(t, pci ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT : HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    return nullptr;
  }
  return t;
}

// The GPUs hwloc sees on this node (topo/gpu_locality.hpp), probed once.
const std::vector<NodeGpu>& node_gpus_once() {
  static const std::vector<NodeGpu> g = [] {
    std::vector<NodeGpu> r;
    if (hwloc_topology_t t = load_topology(true)) {
      r = node_gpus(t);
      hwloc_topology_destroy(t);
    }
    return r;
  }();
  return g;
}

}  // namespace

int local_domain(const std::string& kind) {
  if (kind == "gpu" || kind == "gcd") {
    // Asked only when one device is visible: reading PCI devices costs more than the CPUs.
    const int device = visible_gpu(std::getenv("ROCR_VISIBLE_DEVICES"), std::getenv("HIP_VISIBLE_DEVICES"),
                                   std::getenv("CUDA_VISIBLE_DEVICES"));
    if (device < 0) return -1;
    const GpuDomains d = gpu_domains(node_gpus_once(), device);
    return kind == "gcd" ? d.gcd : d.gpu;
  }
  hwloc_obj_type_t type;
  if (kind == "package" || kind == "socket")
    type = HWLOC_OBJ_PACKAGE;
  else if (kind == "numa")
    type = HWLOC_OBJ_NUMANODE;
  else
    return -1;
  // Loaded once per process and kept until exit (never destroyed: no exit-order hazards).
  static const hwloc_topology_t topology = load_topology(false);
  if (!topology) return -1;
  hwloc_bitmap_t binding = hwloc_bitmap_alloc();
  if (!binding) return -1;
  int id = -1;
  if (hwloc_get_cpubind(topology, binding, HWLOC_CPUBIND_PROCESS) == 0) id = domain_of_cpuset(topology, binding, type);
  hwloc_bitmap_free(binding);
  return id;
}

#else

// Without hwloc (HIER_WITH_HWLOC off, or hwloc not found) no domain is known; auto levels are
// then just the node.
int local_domain(const std::string&) { return -1; }

#endif

}  // namespace hier::topo
