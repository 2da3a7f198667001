#include "backends/systemd/unit_properties.h"

#include <gtest/gtest.h>

namespace ptyvisor::backends::systemd {
namespace {

// Attack: an admin's [session.properties] (or a careless copy of a unit file) turns the
// sandbox that every session gets off. Refused when the configuration is loaded.
TEST(UnitProperties, ConfigurationCannotTurnTheEnforcedSandboxOff) {
    std::string why;
    for (const char* name : {"NoNewPrivileges", "RestrictSUIDSGID"})
        for (const char* value : {"no", "false", "0", "off", " no "}) {
            why.clear();
            EXPECT_FALSE(validate_properties({{name, value}}, why)) << name << "=" << value;
            EXPECT_NE(why.find("cannot be turned off"), std::string::npos) << why;
        }
}

TEST(UnitProperties, ConfigurationMayRestateOrTightenTheSandbox) {
    std::string why;
    EXPECT_TRUE(validate_properties({{"NoNewPrivileges", "yes"}, {"RestrictSUIDSGID", "true"},
                                     {"ProtectSystem", "strict"}, {"PrivateTmp", "yes"}},
                                    why))
        << why;
}

TEST(UnitProperties, TheBoundingSetIsNotConfigurable) {
    std::string why;
    EXPECT_FALSE(validate_properties({{"CapabilityBoundingSet", "CAP_SYS_ADMIN"}}, why));
    EXPECT_FALSE(validate_properties({{"AmbientCapabilities", "CAP_SYS_ADMIN"}}, why));
}

}  // namespace
}  // namespace ptyvisor::backends::systemd
