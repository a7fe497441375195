// The watchdog's side channel chooses where it listens (diag/side_channel.hpp, choose_addresses):
// only the addresses the job uses between its hosts, loopback only when every rank is on one
// host, the interface HIER_WATCHDOG_IF names, and one line for a name this host does not have.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "diag/side_channel.hpp"

using hier::diag::channel::choose_addresses;
using hier::diag::channel::Iface;

namespace {
uint32_t ip(const char* s) {
  in_addr a{};
  inet_pton(AF_INET, s, &a);
  return a.s_addr;
}
Iface iface(const char* name, const char* addr, const char* mask, bool lo = false) {
  return Iface{name, ip(addr), ip(mask), lo};
}
// A node with loopback, the job's network (eth0), a second network the job does not use (ib9,
// whose subnet holds no other node) and a container bridge with the same address on every node.
std::vector<Iface> node(const char* eth0) {
  return {iface("lo", "127.0.0.1", "255.0.0.0", true), iface("eth0", eth0, "255.255.255.0"),
          iface("ib9", "10.99.0.1", "255.255.255.0"), iface("docker0", "172.17.0.1", "255.255.0.0")};
}
const auto no_route = [](uint32_t) { return 0u; };
}  // namespace

TEST(SideChannelAddresses, TheInterfaceThatReachesTheOtherNodes) {
  // Two other nodes, each with its eth0 address, its own unused 10.99.x network and the bridge.
  const std::vector<std::vector<uint32_t>> others = {{ip("192.168.5.2"), ip("10.99.1.1"), ip("172.17.0.1")},
                                                     {ip("192.168.5.3"), ip("10.99.2.1"), ip("172.17.0.1")}};
  std::string err;
  const auto got = choose_addresses(node("192.168.5.1"), others, false, "", no_route, err);
  EXPECT_EQ(got, std::vector<uint32_t>{ip("192.168.5.1")}) << err;
  EXPECT_TRUE(err.empty());
}

TEST(SideChannelAddresses, LoopbackOnlyOnOneHost) {
  std::string err;
  const auto got = choose_addresses(node("192.168.5.1"), {}, true, "", no_route, err);
  EXPECT_EQ(got, std::vector<uint32_t>{ip("127.0.0.1")});
}

TEST(SideChannelAddresses, ARoutedNetworkTakesTheKernelsSourceAddress) {
  // The other node is in no local subnet: the kernel's route to it decides.
  const std::vector<std::vector<uint32_t>> others = {{ip("10.20.30.40")}};
  std::string err;
  const auto route = [](uint32_t to) { return to == ip("10.20.30.40") ? ip("192.168.5.1") : 0u; };
  EXPECT_EQ(choose_addresses(node("192.168.5.1"), others, false, "", route, err), std::vector<uint32_t>{ip("192.168.5.1")});
  // No route either: nothing, and why.
  const auto none = choose_addresses(node("192.168.5.1"), others, false, "", no_route, err);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(err, "no interface of this host reaches the other nodes' addresses");
}

TEST(SideChannelAddresses, HierWatchdogIfNamesTheInterface) {
  const std::vector<std::vector<uint32_t>> others = {{ip("192.168.5.2")}};
  std::string err;
  EXPECT_EQ(choose_addresses(node("192.168.5.1"), others, false, "ib9", no_route, err), std::vector<uint32_t>{ip("10.99.0.1")});
  EXPECT_EQ(choose_addresses(node("192.168.5.1"), {}, true, "eth0", no_route, err), std::vector<uint32_t>{ip("192.168.5.1")});
  const auto bad = choose_addresses(node("192.168.5.1"), others, false, "eth9", no_route, err);
  EXPECT_TRUE(bad.empty());
  EXPECT_EQ(err, "HIER_WATCHDOG_IF=eth9: no interface of that name with an IPv4 address on this host "
                 "(its interfaces: lo, eth0, ib9, docker0)");
}
