#include "server/reply_budget.h"

#include <gtest/gtest.h>

namespace ptyvisor::server {
namespace {

TEST(ReplyBudget, OneUidIsShortenedToItsShareAndTheRestIsLeftToOthers) {
    ReplyBudget budget(100, 150);
    EXPECT_EQ(budget.reserve(1000, 60), 60u);
    EXPECT_EQ(budget.reserve(1000, 60), 40u);  // its share is 100
    EXPECT_EQ(budget.reserve(1000, 1), 0u);
    EXPECT_EQ(budget.used_by(1000), 100u);
    EXPECT_EQ(budget.reserve(0, 80), 50u);  // the total is 150
    EXPECT_EQ(budget.used(), 150u);
    EXPECT_EQ(budget.reserve(2000, 1), 0u);
}

TEST(ReplyBudget, ReleaseGivesBackExactlyWhatWasGranted) {
    ReplyBudget budget(100, 150);
    const auto a = budget.reserve(1000, 70);
    const auto b = budget.reserve(1000, 70);
    ASSERT_EQ(a + b, 100u);
    budget.release(1000, a);
    EXPECT_EQ(budget.used_by(1000), b);
    budget.release(1000, b);
    EXPECT_EQ(budget.used(), 0u);
    EXPECT_EQ(budget.used_by(1000), 0u);
    budget.release(1000, 5);  // nothing held: nothing changes
    EXPECT_EQ(budget.used(), 0u);
}

TEST(ReplyBudget, ReserveAllIsAllOrNothing) {
    ReplyBudget budget(100, 150);
    EXPECT_TRUE(budget.reserve_all(1000, 90));
    EXPECT_FALSE(budget.reserve_all(1000, 11));
    EXPECT_EQ(budget.used_by(1000), 90u);
    EXPECT_TRUE(budget.reserve_all(1000, 10));
    EXPECT_TRUE(budget.reserve_all(2000, 50));
    EXPECT_FALSE(budget.reserve_all(3000, 1));
}

}  // namespace
}  // namespace ptyvisor::server
