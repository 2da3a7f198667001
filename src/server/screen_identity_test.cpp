#include "server/screen_identity.h"

#include <gtest/gtest.h>

#include <set>

namespace ptyvisor::server {
namespace {

TEST(ScreenIdentity, TheFirstNumberWithNoAccountAndNoOtherProcessIsPicked) {
    const std::set<uid_t> accounts{kScreenUidFirst, kScreenUidFirst + 2};
    const std::set<uid_t> processes{kScreenUidFirst + 1};
    const UidProbe probe{[&](uid_t id) { return accounts.contains(id); },
                         [&](uid_t id) { return processes.contains(id); }};
    uid_t uid = 0;
    std::string why;
    ASSERT_TRUE(pick_screen_uid(probe, uid, why)) << why;
    EXPECT_EQ(uid, kScreenUidFirst + 3);
}

TEST(ScreenIdentity, AFullRangeIsRefusedWithWhatToDo) {
    const UidProbe probe{[](uid_t) { return true; }, [](uid_t) { return false; }};
    uid_t uid = 0;
    std::string why;
    EXPECT_FALSE(pick_screen_uid(probe, uid, why));
    EXPECT_NE(why.find("[screen] user"), std::string::npos) << why;
}

TEST(ScreenIdentity, OnThisMachineTheNumberPickedHasNoAccount) {
    const UidProbe probe = system_uid_probe();
    uid_t uid = 0;
    std::string why;
    ASSERT_TRUE(pick_screen_uid(probe, uid, why)) << why;
    EXPECT_FALSE(probe.has_account(uid));
    EXPECT_FALSE(probe.used_by_others(uid));
    EXPECT_GE(uid, kScreenUidFirst);
    EXPECT_LE(uid, kScreenUidLast);
}

}  // namespace
}  // namespace ptyvisor::server
