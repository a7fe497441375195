// The hardware domains of HIER_LEVELS=auto (src/topo/hwloc_domains.*), without MPI and without
// special hardware: the GPU rules on chosen variables and PCI ids, the cpuset rule on hwloc's
// synthetic topologies.
#include "topo/hwloc_domains.hpp"

#include <gtest/gtest.h>

#include <initializer_list>

namespace hier::topo {
namespace {

TEST(VisibleGpu, NothingSetIsUnknown) { EXPECT_EQ(visible_gpu(nullptr, nullptr, nullptr), -1); }

TEST(VisibleGpu, OneIdInOneVariable) {
  EXPECT_EQ(visible_gpu("5", nullptr, nullptr), 5);
  EXPECT_EQ(visible_gpu(nullptr, "3", nullptr), 3);
  EXPECT_EQ(visible_gpu(nullptr, nullptr, "1"), 1);
  EXPECT_EQ(visible_gpu(nullptr, nullptr, "12"), 12);
}

TEST(VisibleGpu, HipSelectsAmongRocrDevices) {
  EXPECT_EQ(visible_gpu("4,5,6,7", "2", nullptr), 6);
  EXPECT_EQ(visible_gpu("4,5,6,7", nullptr, "0"), 4);  // CUDA_VISIBLE_DEVICES stands for HIP's
  EXPECT_EQ(visible_gpu("3", "0", nullptr), 3);
  EXPECT_EQ(visible_gpu("3", "1", nullptr), -1);  // index past ROCR's list
  EXPECT_EQ(visible_gpu("4,5", "0,1", nullptr), -1);
}

TEST(VisibleGpu, HipBeforeCuda) { EXPECT_EQ(visible_gpu(nullptr, "2", "0"), 2); }

TEST(VisibleGpu, SeveralOrNoneOrUnparsableIsUnknown) {
  EXPECT_EQ(visible_gpu("0,1", nullptr, nullptr), -1);
  EXPECT_EQ(visible_gpu(nullptr, nullptr, "0,1,2,3"), -1);
  EXPECT_EQ(visible_gpu("", nullptr, nullptr), -1);
  EXPECT_EQ(visible_gpu(nullptr, nullptr, ""), -1);
  EXPECT_EQ(visible_gpu("GPU-4f3a9c", nullptr, nullptr), -1);
  EXPECT_EQ(visible_gpu(nullptr, nullptr, "MIG-0c1d2e"), -1);
  EXPECT_EQ(visible_gpu(nullptr, nullptr, "-1"), -1);
  EXPECT_EQ(visible_gpu(nullptr, nullptr, " 1"), -1);
  EXPECT_EQ(visible_gpu(nullptr, nullptr, "1,"), -1);
  EXPECT_EQ(visible_gpu(nullptr, nullptr, "99999999999"), -1);
}

TEST(GpusPerPackage, Mi250xGcdsPair) {
  std::vector<std::pair<unsigned, unsigned>> frontier(8, {0x1002, 0x7408});
  EXPECT_EQ(gpus_per_package(frontier), 2);
  EXPECT_EQ(gpus_per_package({{0x1002, 0x740c}, {0x1002, 0x740c}}), 2);  // MI250
}

TEST(GpusPerPackage, OtherGpusAreTheirOwnPackage) {
  EXPECT_EQ(gpus_per_package({{0x1002, 0x740f}}), 1);                    // MI210
  EXPECT_EQ(gpus_per_package({{0x10de, 0x2330}, {0x10de, 0x2330}}), 1);  // H100
  EXPECT_EQ(gpus_per_package({{0x1002, 0x7408}, {0x10de, 0x2330}}), 1);  // mixed: no pairing
  EXPECT_EQ(gpus_per_package({}), -1);
}

TEST(GpuPackage, FrontierConvention) {
  // Frontier: GCDs 2k and 2k+1 are the two dies of MI250X k.
  const int expect[8] = {0, 0, 1, 1, 2, 2, 3, 3};
  for (int d = 0; d < 8; ++d) EXPECT_EQ(gpu_package(d, 2), expect[d]) << d;
  EXPECT_EQ(gpu_package(5, 1), 5);
  EXPECT_EQ(gpu_package(-1, 2), -1);
  EXPECT_EQ(gpu_package(3, -1), -1);
}

// Whatever this machine is, an unknown kind has no domain.
TEST(LocalDomain, UnknownKind) { EXPECT_EQ(local_domain("rack"), -1); }

#if defined(HIER_HAVE_HWLOC)

class Synthetic {
 public:
  explicit Synthetic(const char* description) {
    EXPECT_EQ(hwloc_topology_init(&t_), 0);
    EXPECT_EQ(hwloc_topology_set_synthetic(t_, description), 0) << description;
    EXPECT_EQ(hwloc_topology_load(t_), 0);
  }
  ~Synthetic() { hwloc_topology_destroy(t_); }
  Synthetic(const Synthetic&) = delete;
  Synthetic& operator=(const Synthetic&) = delete;

  // The domain of `type` that contains the PUs `pus` (OS indices; synthetic: 0, 1, 2, ...).
  int domain(std::initializer_list<unsigned> pus, hwloc_obj_type_t type) const {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    for (unsigned p : pus) hwloc_bitmap_set(set, p);
    const int id = domain_of_cpuset(t_, set, type);
    hwloc_bitmap_free(set);
    return id;
  }
  int whole(hwloc_obj_type_t type) const {
    return domain_of_cpuset(t_, hwloc_topology_get_topology_cpuset(t_), type);
  }

 private:
  hwloc_topology_t t_ = nullptr;
};

// 2 packages x 2 NUMA nodes x 2 cores: package 0 = PUs 0-3, NUMA node k = PUs 2k, 2k+1.
TEST(DomainOfCpuset, InsideOnePackage) {
  Synthetic m("package:2 numa:2 core:2 pu:1");
  EXPECT_EQ(m.domain({0}, HWLOC_OBJ_PACKAGE), 0);
  EXPECT_EQ(m.domain({0, 1, 2, 3}, HWLOC_OBJ_PACKAGE), 0);
  EXPECT_EQ(m.domain({4, 5}, HWLOC_OBJ_PACKAGE), 1);
  EXPECT_EQ(m.domain({7}, HWLOC_OBJ_PACKAGE), 1);
}

TEST(DomainOfCpuset, InsideOneNuma) {
  Synthetic m("package:2 numa:2 core:2 pu:1");
  EXPECT_EQ(m.domain({0, 1}, HWLOC_OBJ_NUMANODE), 0);
  EXPECT_EQ(m.domain({2, 3}, HWLOC_OBJ_NUMANODE), 1);
  EXPECT_EQ(m.domain({4}, HWLOC_OBJ_NUMANODE), 2);
  EXPECT_EQ(m.domain({6, 7}, HWLOC_OBJ_NUMANODE), 3);
  EXPECT_EQ(m.domain({1, 2}, HWLOC_OBJ_NUMANODE), -1);  // two NUMA nodes of package 0
  EXPECT_EQ(m.domain({1, 2}, HWLOC_OBJ_PACKAGE), 0);
}

TEST(DomainOfCpuset, SpanningDomainsIsUnknown) {
  Synthetic m("package:2 numa:2 core:2 pu:1");
  EXPECT_EQ(m.domain({3, 4}, HWLOC_OBJ_PACKAGE), -1);
  EXPECT_EQ(m.domain({0, 7}, HWLOC_OBJ_PACKAGE), -1);
  EXPECT_EQ(m.whole(HWLOC_OBJ_PACKAGE), -1);  // not bound
  EXPECT_EQ(m.whole(HWLOC_OBJ_NUMANODE), -1);
}

TEST(DomainOfCpuset, EmptyOrForeignBindingIsUnknown) {
  Synthetic m("package:2 numa:2 core:2 pu:1");
  EXPECT_EQ(m.domain({}, HWLOC_OBJ_PACKAGE), -1);
  EXPECT_EQ(m.domain({100}, HWLOC_OBJ_PACKAGE), -1);
  EXPECT_EQ(m.domain({5, 100}, HWLOC_OBJ_PACKAGE), 1);  // PUs the machine lacks are ignored
}

TEST(DomainOfCpuset, OneDomainSplitsNothing) {
  Synthetic one("package:1 numa:2 core:2 pu:1");
  EXPECT_EQ(one.domain({0}, HWLOC_OBJ_PACKAGE), -1);
  EXPECT_EQ(one.domain({2, 3}, HWLOC_OBJ_NUMANODE), 1);
  Synthetic flat("package:1 core:4 pu:2");  // one package, one NUMA node: like this test machine
  EXPECT_EQ(flat.domain({0}, HWLOC_OBJ_PACKAGE), -1);
  EXPECT_EQ(flat.domain({0}, HWLOC_OBJ_NUMANODE), -1);
}

TEST(DomainOfCpuset, PackagesWithoutNumaSplit) {
  // 2 packages sharing one NUMA node (the memory above them): packages split, NUMA does not.
  Synthetic m("package:2 core:2 pu:2");
  EXPECT_EQ(m.domain({0, 1, 2, 3}, HWLOC_OBJ_PACKAGE), 0);
  EXPECT_EQ(m.domain({6}, HWLOC_OBJ_PACKAGE), 1);
  EXPECT_EQ(m.domain({6}, HWLOC_OBJ_NUMANODE), -1);
}

TEST(DomainOfCpuset, FrontierLikeNode) {
  // One package of 4 NUMA domains (NPS4) of 2 L3 regions x 8 cores: NUMA k = PUs 16k..16k+15.
  Synthetic m("package:1 numa:4 l3:2 core:8 pu:1");
  EXPECT_EQ(m.domain({1, 2, 3, 4, 5, 6, 7}, HWLOC_OBJ_NUMANODE), 0);
  EXPECT_EQ(m.domain({49, 50}, HWLOC_OBJ_NUMANODE), 3);
  EXPECT_EQ(m.domain({49, 50}, HWLOC_OBJ_PACKAGE), -1);
}

#endif

}  // namespace
}  // namespace hier::topo
