// The GPUs of a node as hwloc sees them, and the two GPU levels they give a rank: `gcd` (the
// device it runs on) and `gpu` (the package holding that device: an MI250X holds two GCDs).
#pragma once

#include <cstdint>
#include <vector>

#if defined(HIER_HAVE_HWLOC)
#include <hwloc.h>
#endif

namespace hier::topo {

// One GPU of the node: a PCI device, with what locates it.
struct NodeGpu {
  unsigned vendor = 0, device = 0;  // PCI ids
  // The runtime's device id, from the GPU OS device below it (rsmiN for ROCm, nvmlN for CUDA):
  // the ids ROCR_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES list. -1 where hwloc names none (no
  // vendor plugin): the GPU's place in hwloc's PCI order then stands for it.
  int runtime_id = -1;
  uint64_t pci_switch = 0;  // hwloc gp_index of the PCI-to-PCI bridge right above it; 0 = none
  uint64_t locality = 0;    // gp_index of its first non-I/O ancestor (NUMA group, package, machine)
};

// Per GPU (same order), its package id, equal for the GCDs of one package. Only MI250X / MI250
// GCDs share packages (gpus_per_package, hwloc_domains.hpp), in pairs; the pair is found from
// the topology, first match wins: the GCDs behind one PCI switch; else the GCDs attached to one
// CPU-side object (NUMA domain); else the numbering convention, ids 2k and 2k+1. Every other
// GPU is a package of its own.
std::vector<int> gpu_packages(const std::vector<NodeGpu>& gpus);

// The rank's gcd and gpu ids for device `device` (a physical id, hwloc_domains.hpp's
// visible_gpu): the device itself and its package; -1 for both when the node has no such GPU.
struct GpuDomains {
  int gcd = -1;
  int gpu = -1;
};
GpuDomains gpu_domains(const std::vector<NodeGpu>& gpus, int device);

#if defined(HIER_HAVE_HWLOC)
// The AMD and NVIDIA GPUs of a topology loaded with PCI devices kept, in hwloc's PCI order, each
// with its runtime id and locality: PCI devices of vendor 0x1002 or 0x10de and class display
// (0x03xx) or processing accelerator (0x12xx). A BMC's VGA (ASPEED, Matrox) is not a GPU.
std::vector<NodeGpu> node_gpus(hwloc_topology_t topology);
#endif

}  // namespace hier::topo
