#include "backends/systemd/profile_properties.h"

#include <gtest/gtest.h>

namespace ptyvisor::backends::systemd {
namespace {

const PropertyValue* find(const std::vector<PropertyValue>& props, std::string_view name) {
    for (const auto& p : props)
        if (p.name == name) return &p;
    return nullptr;
}

template <typename T>
T value_of(const std::vector<PropertyValue>& props, std::string_view name) {
    const PropertyValue* p = find(props, name);
    EXPECT_NE(p, nullptr) << name;
    if (!p) return T{};
    const T* v = std::get_if<T>(&p->value);
    EXPECT_NE(v, nullptr) << name << " has another type";
    return v ? *v : T{};
}

SandboxProfile strict_profile() {
    SandboxProfile p;
    p.name = "strict";
    p.memory_max = 256ull << 20;
    p.tasks_max = 64;
    p.cpu_quota_percent = 50;
    p.network = SandboxProfile::Network::None;
    p.filesystem = SandboxProfile::Filesystem::ReadOnly;
    p.writable_cwd = true;
    p.writable = {"/var/cache/agent"};
    p.hidden = {"/etc/secrets"};
    return p;
}

TEST(ProfileProperties, EverySettingBecomesItsUnitProperty) {
    std::vector<PropertyValue> extra;
    std::vector<std::string> dropped;
    apply_profile(strict_profile(), "/home/agent/work", {}, extra, dropped);
    EXPECT_EQ(value_of<std::uint64_t>(extra, "MemoryMax"), 256ull << 20);
    EXPECT_EQ(value_of<std::uint64_t>(extra, "MemorySwapMax"), 0u);
    EXPECT_EQ(value_of<std::uint64_t>(extra, "TasksMax"), 64u);
    EXPECT_EQ(value_of<std::uint64_t>(extra, "CPUQuotaPerSecUSec"), 500'000u);  // half of 1 s per s
    EXPECT_TRUE(value_of<bool>(extra, "PrivateNetwork"));
    EXPECT_EQ(value_of<std::string>(extra, "ProtectSystem"), "strict");
    EXPECT_TRUE(value_of<bool>(extra, "PrivateTmp"));
    EXPECT_EQ(value_of<std::vector<std::string>>(extra, "TemporaryFileSystem"),
              std::vector<std::string>{"/dev/shm"});
    EXPECT_EQ(value_of<std::vector<std::string>>(extra, "ReadWritePaths"),
              (std::vector<std::string>{"/home/agent/work", "-/var/cache/agent"}));
    EXPECT_EQ(value_of<std::vector<std::string>>(extra, "InaccessiblePaths"),
              std::vector<std::string>{"-/etc/secrets"});
    EXPECT_TRUE(dropped.empty());
}

// systemd 252 fails the start (226/NAMESPACE) on a ReadWritePaths= entry that PrivateTmp=
// hides: a working directory under /tmp is bound in instead.
TEST(ProfileProperties, PathsUnderThePrivateTmpAreBoundIn) {
    SandboxProfile p = strict_profile();
    p.writable = {"/var/tmp/cache", "/dev/shm/x", "/srv/data"};
    std::vector<PropertyValue> extra;
    std::vector<std::string> dropped;
    apply_profile(p, "/tmp/agent-work", {}, extra, dropped);
    EXPECT_EQ(value_of<std::vector<std::string>>(extra, "BindPaths"),
              (std::vector<std::string>{"/tmp/agent-work", "-/var/tmp/cache", "-/dev/shm/x"}));
    EXPECT_EQ(value_of<std::vector<std::string>>(extra, "ReadWritePaths"), std::vector<std::string>{"-/srv/data"});
    EXPECT_TRUE(dropped.empty());
}

TEST(ProfileProperties, AnEmptyProfileAddsNothing) {
    std::vector<PropertyValue> extra{{"MemoryMax", std::uint64_t{1} << 30}};
    std::vector<std::string> dropped;
    SandboxProfile none;
    none.name = "none";
    apply_profile(none, "/w", {}, extra, dropped);
    EXPECT_EQ(extra.size(), 1u);
    // Without a read-only file system, `writable` means nothing and adds no ReadWritePaths=.
    none.writable_cwd = true;
    none.writable = {"/x"};
    apply_profile(none, "/w", {}, extra, dropped);
    EXPECT_EQ(find(extra, "ReadWritePaths"), nullptr);
}

// Attack: a profile chosen by the agent raises the limits the administrator configured.
TEST(ProfileProperties, AProfileCannotRaiseConfiguredLimits) {
    std::vector<PropertyValue> extra{{"MemoryMax", std::uint64_t{128} << 20},
                                     {"TasksMax", std::uint64_t{16}},
                                     {"CPUQuotaPerSecUSec", std::uint64_t{200'000}}};
    std::vector<std::string> dropped;
    apply_profile(strict_profile(), "/w", {}, extra, dropped);
    EXPECT_EQ(value_of<std::uint64_t>(extra, "MemoryMax"), 128ull << 20);
    EXPECT_EQ(value_of<std::uint64_t>(extra, "TasksMax"), 16u);
    EXPECT_EQ(value_of<std::uint64_t>(extra, "CPUQuotaPerSecUSec"), 200'000u);
    // ... and each is present once: systemd would keep the last of two.
    int memory = 0;
    for (const auto& p : extra) memory += p.name == "MemoryMax";
    EXPECT_EQ(memory, 1);
}

TEST(ProfileProperties, AProfileLowersConfiguredLimits) {
    std::vector<PropertyValue> extra{{"MemoryMax", std::uint64_t{1} << 30},
                                     {"TasksMax", std::numeric_limits<std::uint64_t>::max()}};
    std::vector<std::string> dropped;
    apply_profile(strict_profile(), "/w", {}, extra, dropped);
    EXPECT_EQ(value_of<std::uint64_t>(extra, "MemoryMax"), 256ull << 20);
    EXPECT_EQ(value_of<std::uint64_t>(extra, "TasksMax"), 64u);
}

// Attack: the configuration says ProtectSystem=full and PrivateNetwork=no; a profile must
// still get (only) the stricter setting, and never weaken either.
TEST(ProfileProperties, AProfileOnlyTightensConfiguredProtections) {
    std::vector<PropertyValue> extra{{"ProtectSystem", std::string("full")}, {"PrivateNetwork", false}};
    std::vector<std::string> dropped;
    apply_profile(strict_profile(), "/w", {}, extra, dropped);
    EXPECT_EQ(value_of<std::string>(extra, "ProtectSystem"), "strict");
    EXPECT_TRUE(value_of<bool>(extra, "PrivateNetwork"));

    std::vector<PropertyValue> strict{{"ProtectSystem", std::string("strict")}, {"PrivateNetwork", true}};
    SandboxProfile loose;
    loose.name = "loose";  // network host, file system host
    apply_profile(loose, "/w", {}, strict, dropped);
    EXPECT_EQ(value_of<std::string>(strict, "ProtectSystem"), "strict");
    EXPECT_TRUE(value_of<bool>(strict, "PrivateNetwork"));
}

// Attack: the agent's own unit runs with ProtectSystem=strict and only ~/work writable; a
// profile whose `writable` names /etc (or a working directory elsewhere) would reopen them
// to the session through ReadWritePaths=.
TEST(ProfileProperties, WritablePathsCannotReopenTheAgentsReadOnlySandbox) {
    InheritedFilesystem agent;
    agent.protect_system = "strict";
    agent.read_write_paths = {"/home/agent/work"};
    SandboxProfile p = strict_profile();
    p.writable = {"/etc", "/home/agent/work/build", "/home/agent/workshop"};
    std::vector<PropertyValue> extra;
    std::vector<std::string> dropped;
    apply_profile(p, "/srv/elsewhere", agent, extra, dropped);
    EXPECT_EQ(value_of<std::vector<std::string>>(extra, "ReadWritePaths"),
              std::vector<std::string>{"-/home/agent/work/build"});
    EXPECT_EQ(dropped, (std::vector<std::string>{"/srv/elsewhere", "/etc", "/home/agent/workshop"}));
}

TEST(ProfileProperties, WritablePathsCannotReopenConfiguredReadOnlyParts) {
    InheritedFilesystem in;
    in.protect_system = "full";
    in.protect_home = "read-only";
    in.read_only_paths = {"-/srv/ro"};
    in.inaccessible_paths = {"/srv/hidden"};
    SandboxProfile p = strict_profile();
    p.writable = {"/usr/local", "/etc/x", "/home/other", "/srv/ro/a", "/srv/hidden/b", "/srv/rw", "/boot"};
    std::vector<PropertyValue> extra;
    std::vector<std::string> dropped;
    apply_profile(p, "/root/w", in, extra, dropped);
    EXPECT_EQ(value_of<std::vector<std::string>>(extra, "ReadWritePaths"), std::vector<std::string>{"-/srv/rw"});
    EXPECT_EQ(dropped.size(), 7u);
}

TEST(ProfileProperties, InheritedFilesystemTakesTheStrictestOfAgentAndConfiguration) {
    const auto in = inherited_filesystem(nullptr, {{"ProtectSystem", std::string("full")},
                                                   {"ProtectHome", std::string("read-only")},
                                                   {"MemoryMax", std::uint64_t{1}}});
    EXPECT_EQ(in.protect_system, "full");
    EXPECT_EQ(in.protect_home, "read-only");
}

TEST(ProfileProperties, PathUnder) {
    EXPECT_TRUE(path_under("/a/b", "/a"));
    EXPECT_TRUE(path_under("/a", "/a/"));
    EXPECT_TRUE(path_under("/a/b", "-/a"));
    EXPECT_FALSE(path_under("/ab", "/a"));
    EXPECT_TRUE(path_under("/x", "/"));
    EXPECT_FALSE(path_under("/", "/a"));
}

}  // namespace
}  // namespace ptyvisor::backends::systemd
