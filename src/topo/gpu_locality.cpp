#include "topo/gpu_locality.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "topo/hwloc_domains.hpp"

namespace hier::topo {
namespace {

// The id a GPU stands for: its runtime id, else its place in the list.
int id_of(const std::vector<NodeGpu>& gpus, size_t i) {
  return gpus[i].runtime_id >= 0 ? gpus[i].runtime_id : static_cast<int>(i);
}

// Groups the GPUs by `key` (0 = not known); the package ids (each group's smallest id) when
// every GPU has a key and every group holds exactly `per` of them, else empty.
template <class Key>
std::vector<int> pair_by(const std::vector<NodeGpu>& gpus, int per, Key key) {
  std::map<uint64_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const uint64_t k = key(gpus[i]);
    if (k == 0) return {};
    groups[k].push_back(i);
  }
  std::vector<int> out(gpus.size());
  for (const auto& [k, members] : groups) {
    if (static_cast<int>(members.size()) != per) return {};
    int least = id_of(gpus, members[0]);
    for (size_t i : members) least = std::min(least, id_of(gpus, i));
    for (size_t i : members) out[i] = least;
  }
  return out;
}

}  // namespace

std::vector<int> gpu_packages(const std::vector<NodeGpu>& gpus) {
  std::vector<std::pair<unsigned, unsigned>> ids;
  for (const NodeGpu& g : gpus) ids.emplace_back(g.vendor, g.device);
  const int per = gpus_per_package(ids);
  std::vector<int> out(gpus.size());
  if (per > 1) {
    // An MI250X's GCDs sit behind one PCIe switch where the topology shows one (hand-written
    // or vendor topologies); where each GCD has a root port of its own, both are still local
    // to the same NUMA domain, and no other GCD is.
    if (auto p = pair_by(gpus, per, [](const NodeGpu& g) { return g.pci_switch; }); !p.empty()) return p;
    if (auto p = pair_by(gpus, per, [](const NodeGpu& g) { return g.locality; }); !p.empty()) return p;
  }
  for (size_t i = 0; i < gpus.size(); ++i) out[i] = gpu_package(id_of(gpus, i), per > 1 ? per : 1);
  return out;
}

GpuDomains gpu_domains(const std::vector<NodeGpu>& gpus, int device) {
  if (device < 0) return {};
  const std::vector<int> packages = gpu_packages(gpus);
  for (size_t i = 0; i < gpus.size(); ++i)
    if (id_of(gpus, i) == device) return {device, packages[i]};
  return {};
}

#if defined(HIER_HAVE_HWLOC)

namespace {

// The runtime id hwloc's vendor plugins give a GPU OS device: "rsmi3" (ROCm SMI, the ids
// ROCR_VISIBLE_DEVICES lists) or "nvml3" (NVML: CUDA's PCI order ids); -1 for any other.
int runtime_id_of(hwloc_obj_t pci) {
  for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE || c->attr->osdev.type != HWLOC_OBJ_OSDEV_GPU || !c->name) continue;
    for (const char* prefix : {"rsmi", "nvml"}) {
      const size_t n = std::strlen(prefix);
      if (std::strncmp(c->name, prefix, n) != 0 || c->name[n] < '0' || c->name[n] > '9') continue;
      char* end = nullptr;
      const long v = std::strtol(c->name + n, &end, 10);
      if (*end == '\0' && v < (1 << 20)) return static_cast<int>(v);
    }
  }
  return -1;
}

}  // namespace

std::vector<NodeGpu> node_gpus(hwloc_topology_t topology) {
  std::vector<NodeGpu> out;
  for (hwloc_obj_t o = hwloc_get_next_pcidev(topology, nullptr); o; o = hwloc_get_next_pcidev(topology, o)) {
    const auto& a = o->attr->pcidev;
    const unsigned cls = a.class_id >> 8;
    if ((a.vendor_id != 0x1002 && a.vendor_id != 0x10de) || (cls != 0x03 && cls != 0x12)) continue;
    NodeGpu g{a.vendor_id, a.device_id, runtime_id_of(o)};
    const hwloc_obj_t up = o->parent;
    if (up && up->type == HWLOC_OBJ_BRIDGE && up->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
      g.pci_switch = up->gp_index;
    if (const hwloc_obj_t cpu_side = hwloc_get_non_io_ancestor_obj(topology, o)) g.locality = cpu_side->gp_index;
    out.push_back(g);
  }
  return out;
}

#endif

}  // namespace hier::topo
