// The GPU levels of HIER_LEVELS=auto (src/topo/gpu_locality.*, topo/table.hpp's auto_table),
// without MPI and without a GPU: from the hand-written Frontier node topology of this folder
// (README.md) to every rank's gcd / gpu ids, and from those to the levels.
#include <gtest/gtest.h>
#include <hwloc.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "topo/gpu_locality.hpp"
#include "topo/hwloc_domains.hpp"
#include "topo/table.hpp"

namespace hier::topo {
namespace {

std::vector<NodeGpu> frontier_gpus() {
  hwloc_topology_t t = nullptr;
  EXPECT_EQ(hwloc_topology_init(&t), 0);
  EXPECT_EQ(hwloc_topology_set_xml(t, HIER_FRONTIER_XML), 0);
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  EXPECT_EQ(hwloc_topology_load(t), 0);
  std::vector<NodeGpu> g = node_gpus(t);
  hwloc_topology_destroy(t);
  return g;
}

TEST(FrontierXml, EightGcdsNamedByRsmi) {
  const std::vector<NodeGpu> g = frontier_gpus();
  ASSERT_EQ(g.size(), 8u);  // the 4 NICs are not GPUs
  std::map<int, int> seen;
  for (const NodeGpu& d : g) {
    EXPECT_EQ(d.vendor, 0x1002u);
    EXPECT_EQ(d.device, 0x7408u);
    EXPECT_NE(d.pci_switch, 0u);
    EXPECT_NE(d.locality, 0u);
    ++seen[d.runtime_id];
  }
  for (int id = 0; id < 8; ++id) EXPECT_EQ(seen[id], 1) << "rsmi" << id;
  // hwloc's PCI order follows the NUMA domains (GCDs 4, 5 come first), not the runtime's ids:
  // the rsmi names, not the order, must decide.
  EXPECT_EQ(g.front().runtime_id, 4);
}

TEST(FrontierXml, GcdsPairIntoPackages) {
  const std::vector<NodeGpu> g = frontier_gpus();
  for (int gcd = 0; gcd < 8; ++gcd) {
    const GpuDomains d = gpu_domains(g, gcd);
    EXPECT_EQ(d.gcd, gcd);
    EXPECT_EQ(d.gpu, gcd / 2 * 2) << gcd;  // each package named by its lowest GCD
  }
  EXPECT_EQ(gpu_domains(g, 8).gpu, -1);  // no such device on the node
  EXPECT_EQ(gpu_domains(g, -1).gcd, -1);
}

// What HIER_LEVELS=auto makes of it: ranks placed on GCDs by `gcd_of_rank` on `nodes` nodes of
// equal size, each node the Frontier node above.
Shape auto_shape(const std::vector<int>& gcd_of_rank, int nodes) {
  const std::vector<NodeGpu> g = frontier_gpus();
  const int n = static_cast<int>(gcd_of_rank.size()) * nodes;
  std::map<std::string, std::vector<int>> det;
  for (int r = 0; r < n; ++r) {
    const GpuDomains d = gpu_domains(g, gcd_of_rank[r % gcd_of_rank.size()]);
    det["gcd"].push_back(d.gcd);
    det["gpu"].push_back(d.gpu);
    det["node"].push_back(r / static_cast<int>(gcd_of_rank.size()));
  }
  return analyze(auto_table(n, det));
}

TEST(FrontierAuto, TwoRanksPerGcdFindGcdAndGpuLevels) {
  // 16 ranks per node, 2 per GCD: gcd:2,gpu:4 inside the node, then the nodes.
  std::vector<int> place;
  for (int r = 0; r < 16; ++r) place.push_back(r / 2);
  const Shape two = auto_shape(place, 2);
  EXPECT_EQ(two.names, (std::vector<std::string>{"gcd", "gpu", "node"}));
  EXPECT_EQ(two.dims, (std::vector<int>{2, 2, 4, 2}));
  EXPECT_EQ(two.describe(), "gcd:2 x gpu:2 x node:4 x world:2 (cartesian, consecutive)");
  // One node: the same levels inside it (the node level splits nothing and is dropped).
  const Shape one = auto_shape(place, 1);
  EXPECT_EQ(one.names, (std::vector<std::string>{"gcd", "gpu"}));
  EXPECT_EQ(one.dims, (std::vector<int>{2, 2, 4}));
}

TEST(FrontierAuto, OneRankPerGcdFindsGpuLevel) {
  // srun --gpus-per-task=1: the gcd level splits nothing, packages of 2 ranks remain.
  const Shape s = auto_shape({0, 1, 2, 3, 4, 5, 6, 7}, 2);
  EXPECT_EQ(s.names, (std::vector<std::string>{"gpu", "node"}));
  EXPECT_EQ(s.dims, (std::vector<int>{2, 4, 2}));
}

TEST(FrontierAuto, RanksOnGcdsOutOfOrder) {
  // Frontier's closest binding: ranks of NUMA domain 0 get GCDs 4, 5 (hwloc's first).
  const Shape s = auto_shape({4, 5, 2, 3, 6, 7, 0, 1}, 1);
  EXPECT_EQ(s.names, (std::vector<std::string>{"gpu"}));
  EXPECT_EQ(s.dims, (std::vector<int>{2, 4}));
  EXPECT_TRUE(s.consecutive);
}

TEST(FrontierAuto, UnevenGcdsFallBackToPackages) {
  // 3 ranks on GCD 0, 1 on GCD 1 (one package), 2 and 2 on the next package: gcd is not
  // cartesian, the packages (4 ranks each) are.
  const Shape s = auto_shape({0, 0, 0, 1, 2, 2, 3, 3}, 2);
  EXPECT_EQ(s.names, (std::vector<std::string>{"gpu", "node"}));
  EXPECT_EQ(s.dims, (std::vector<int>{4, 2, 2}));
}

TEST(AutoTable, WithoutGpusPackagesOnlyBelowNodes) {
  // package known, no GPU: kept below two nodes, not inside one (as before GPU levels).
  std::map<std::string, std::vector<int>> det{{"package", {0, 0, 1, 1, 0, 0, 1, 1}},
                                              {"node", {0, 0, 0, 0, 1, 1, 1, 1}}};
  EXPECT_EQ(analyze(auto_table(8, det)).names, (std::vector<std::string>{"package", "node"}));
  det["node"].assign(8, 0);
  EXPECT_TRUE(analyze(auto_table(8, det)).names.empty());
}

// The pairing rules on chosen inputs: the switch wins over the numbering.
NodeGpu gcd(int id, uint64_t sw, uint64_t loc) { return {0x1002, 0x7408, id, sw, loc}; }

TEST(GpuPackages, SwitchThenLocalityThenNumbering) {
  // GCDs 0 and 3 behind one switch, 1 and 2 behind another.
  EXPECT_EQ(gpu_packages({gcd(0, 10, 1), gcd(1, 11, 1), gcd(2, 11, 2), gcd(3, 10, 2)}),
            (std::vector<int>{0, 1, 1, 0}));
  // A root port each: the NUMA domain pairs them.
  EXPECT_EQ(gpu_packages({gcd(0, 10, 7), gcd(1, 11, 8), gcd(2, 12, 8), gcd(3, 13, 7)}),
            (std::vector<int>{0, 1, 1, 0}));
  // Nothing pairs (all on one NUMA domain, no switch): ids 2k, 2k+1.
  EXPECT_EQ(gpu_packages({gcd(0, 0, 5), gcd(1, 0, 5), gcd(2, 0, 5), gcd(3, 0, 5)}),
            (std::vector<int>{0, 0, 1, 1}));
  // No runtime names: places in the list stand for ids.
  EXPECT_EQ(gpu_packages({gcd(-1, 0, 0), gcd(-1, 0, 0)}), (std::vector<int>{0, 0}));
}

TEST(GpuPackages, OtherGpusAreTheirOwnPackage) {
  // Two H100 behind one PCIe switch are still two packages.
  EXPECT_EQ(gpu_packages({{0x10de, 0x2330, 0, 10, 1}, {0x10de, 0x2330, 1, 10, 1}}), (std::vector<int>{0, 1}));
  const GpuDomains d = gpu_domains({{0x10de, 0x2330, 0, 10, 1}, {0x10de, 0x2330, 1, 10, 1}}, 1);
  EXPECT_EQ(d.gcd, 1);
  EXPECT_EQ(d.gpu, 1);
}

// The whole path of a rank: HWLOC_XMLFILE and ROCR_VISIBLE_DEVICES, as the MPI test sets them.
TEST(LocalDomain, FromXmlFileAndVisibleDevice) {
  setenv("HWLOC_XMLFILE", HIER_FRONTIER_XML, 1);
  unsetenv("HIP_VISIBLE_DEVICES");
  unsetenv("CUDA_VISIBLE_DEVICES");
  setenv("ROCR_VISIBLE_DEVICES", "5", 1);
  EXPECT_EQ(local_domain("gcd"), 5);
  EXPECT_EQ(local_domain("gpu"), 4);
  setenv("ROCR_VISIBLE_DEVICES", "4,5,6,7", 1);
  setenv("HIP_VISIBLE_DEVICES", "3", 1);  // index into ROCR's list: GCD 7
  EXPECT_EQ(local_domain("gcd"), 7);
  EXPECT_EQ(local_domain("gpu"), 6);
  unsetenv("HIP_VISIBLE_DEVICES");
  EXPECT_EQ(local_domain("gpu"), -1);  // four devices visible: no one GCD
}

}  // namespace
}  // namespace hier::topo
