#include "backends/direct/session_cgroup.h"

#include <gtest/gtest.h>

namespace ptyvisor::backends::direct {
namespace {

const std::vector<std::string> kAllowed{"opencode.service"};

TEST(AllowedUnits, TheUnitsOwnCgroupIsAllowed) {
    EXPECT_EQ(allowed_unit_cgroup("opencode.service"), "/system.slice/opencode.service");
    EXPECT_TRUE(in_allowed_unit("/system.slice/opencode.service", kAllowed));
    EXPECT_TRUE(in_allowed_unit("/system.slice/b.service", {"a.service", "b.service"}));
}

// Attack: a process of the account in a cgroup that merely ends in the allowed unit's name
// (a transient unit of its own user manager, a slice it controls) passed the old suffix test.
TEST(AllowedUnits, ASameNamedUnitElsewhereIsNotTheAllowedUnit) {
    EXPECT_FALSE(in_allowed_unit("/evil.slice/opencode.service", kAllowed));
    EXPECT_FALSE(in_allowed_unit("/user.slice/user-999.slice/user@999.service/app.slice/opencode.service",
                                 kAllowed));
    EXPECT_FALSE(in_allowed_unit("/opencode.service", kAllowed));
    EXPECT_FALSE(in_allowed_unit("/system.slice/x-opencode.service", kAllowed));
    EXPECT_FALSE(in_allowed_unit("/system.slice/system.slice/opencode.service", kAllowed));
}

TEST(AllowedUnits, CgroupsBelowOrBesideTheUnitAreNotIt) {
    EXPECT_FALSE(in_allowed_unit("/system.slice/opencode.service/child", kAllowed));
    EXPECT_FALSE(in_allowed_unit("/system.slice/opencode.service.d", kAllowed));
    EXPECT_FALSE(in_allowed_unit("/system.slice", kAllowed));
    EXPECT_FALSE(in_allowed_unit("", kAllowed));
    EXPECT_FALSE(in_allowed_unit("/system.slice/opencode.service", {}));
}

}  // namespace
}  // namespace ptyvisor::backends::direct
