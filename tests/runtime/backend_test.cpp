// runtime/backend.cpp: how a split's votes make its groups (every backend's split and the
// Context agree through it, and NCCL's ncclCommSplit orders ranks the same way).
#include "runtime/backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/error.h"

namespace cprr {
namespace {

using ::testing::ElementsAre;

TEST(SplitGroups, OneGroupPerColorAscendingOrderedByKeyThenWorldRank) {
  const std::vector<SplitVote> votes{{1, 0}, {0, 5}, {-1, 0}, {0, 5}, {1, -2}, {0, 1}};
  const auto groups = split_groups(votes);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].first, 0);
  EXPECT_THAT(groups[0].second, ElementsAre(5, 1, 3));  // key 1, then keys 5 in rank order
  EXPECT_EQ(groups[1].first, 1);
  EXPECT_THAT(groups[1].second, ElementsAre(4, 0));
  EXPECT_TRUE(split_groups({{-1, 0}, {-3, 0}}).empty());
}

TEST(SplitGroups, AGroupRankIsThePlaceAmongTheMembersAndNoneWithoutMembers) {
  EXPECT_EQ(group_rank({3, 1, 2}, 1), 1);
  EXPECT_EQ(group_rank({}, 1), -1);
  EXPECT_THROW(group_rank({3, 2}, 1), Error);
}

}  // namespace
}  // namespace cprr
