// Level tables and shapes: nesting, trimming, cartesian detection, coordinates and orders.
#include <gtest/gtest.h>

#include "topo/table.hpp"

namespace {

using hier::topo::analyze;
using hier::topo::LevelSpec;
using hier::topo::make_table;

TEST(CollShape, NodeFakesGroupConsecutiveRanks) {
  const auto s = analyze(make_table(8, {{"node", 4, {}}}));
  ASSERT_TRUE(s.cartesian);
  EXPECT_EQ(s.dims, (std::vector<int>{4, 2}));
  EXPECT_EQ(s.node_of, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_TRUE(s.consecutive);
  // Hierarchical position: c_0 most significant.
  EXPECT_EQ(s.rank_at, (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(s.describe(), "node:4 x world:2 (cartesian, consecutive)");
}

TEST(CollShape, ThreeLevels) {
  const auto s = analyze(make_table(8, {{"gpu", 2, {}}, {"node", 4, {}}}));
  ASSERT_TRUE(s.cartesian);
  EXPECT_EQ(s.dims, (std::vector<int>{2, 2, 2}));
  // Rank 5: second of gpu group 2 (ranks 4,5), which is the first gpu group of node 1.
  EXPECT_EQ(s.coord(5, 0), 1);
  EXPECT_EQ(s.coord(5, 1), 0);
  EXPECT_EQ(s.coord(5, 2), 1);
  EXPECT_EQ(s.local_of[5], 2);  // node position c_0 * 2 + c_1
}

TEST(CollShape, TrivialLevelsAreDropped) {
  // node:4 on 4 ranks is the world; gpu:1 splits nothing finer than the ranks.
  EXPECT_FALSE(analyze(make_table(4, {{"node", 4, {}}})).hierarchical());
  EXPECT_FALSE(analyze(make_table(4, {{"gpu", 1, {}}})).hierarchical());
  const auto s = analyze(make_table(8, {{"gpu", 1, {}}, {"node", 4, {}}, {"rack", 8, {}}}));
  EXPECT_EQ(s.names, (std::vector<std::string>{"node"}));
  // A level equal to the one inside it adds nothing; the outer name describes the groups.
  EXPECT_EQ(analyze(make_table(8, {{"gpu", 4, {}}, {"node", 4, {}}})).names, (std::vector<std::string>{"node"}));
}

TEST(CollShape, UnevenIsTreeOnly) {
  const auto s = analyze(make_table(7, {{"node", 3, {}}}));
  EXPECT_TRUE(s.hierarchical());
  EXPECT_FALSE(s.cartesian);
  EXPECT_EQ(s.node_sizes, (std::vector<int>{3, 3, 1}));
  EXPECT_EQ(s.node_first, (std::vector<int>{0, 3, 6}));
}

TEST(CollShape, ScatteredPlacementIsCartesian) {
  // Round-robin placement: nodes {0,2,4} and {1,3,5}.
  const auto s = analyze(make_table(6, {{"node", 0, {0, 1, 0, 1, 0, 1}}}));
  ASSERT_TRUE(s.cartesian);
  EXPECT_FALSE(s.consecutive);
  EXPECT_EQ(s.node_of, (std::vector<int>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(s.local_of, (std::vector<int>{0, 0, 1, 1, 2, 2}));
}

TEST(CollShape, DetectedLevelsNestInsideTheirParent) {
  // A "package" id that spans two fake nodes is cut at the node boundary.
  const auto t = make_table(8, {{"package", 0, {0, 0, 0, 0, 0, 0, 0, 0}}, {"node", 4, {}}});
  const auto s = analyze(t);
  EXPECT_EQ(s.names, (std::vector<std::string>{"node"}));
  EXPECT_TRUE(s.nested);
}

}  // namespace
