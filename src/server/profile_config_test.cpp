// Sandbox profiles in the configuration ([profiles.NAME], allowed_profiles, default_profile)
// and which one a START gets (profile_choice.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "server/config.h"
#include "server/profile_choice.h"

namespace ptyvisor::server {
namespace {

using backends::SandboxProfile;

class ProfileConfig : public ::testing::Test {
protected:
    bool load(const std::string& text, Config& c, std::string& why) {
        char name[] = "/tmp/ptyvisor-profiles-XXXXXX";
        const int fd = ::mkstemp(name);
        if (fd < 0) return false;
        ::close(fd);
        path_ = name;
        std::ofstream(path_) << text;
        return load_config_file(path_, c, why) && validate(c, why);
    }
    void TearDown() override {
        if (!path_.empty()) ::unlink(path_.c_str());
    }
    std::string path_;
};

TEST(ProfileSizes, ParseAsSystemdWrites) {
    EXPECT_EQ(parse_byte_size("512M"), 512ull << 20);
    EXPECT_EQ(parse_byte_size("2G"), 2ull << 30);
    EXPECT_EQ(parse_byte_size("4096"), 4096u);
    EXPECT_EQ(parse_byte_size("1T"), 1ull << 40);
    EXPECT_EQ(parse_byte_size(""), std::nullopt);
    EXPECT_EQ(parse_byte_size("M"), std::nullopt);
    EXPECT_EQ(parse_byte_size("5X"), std::nullopt);
    EXPECT_EQ(parse_byte_size("-1M"), std::nullopt);
    EXPECT_EQ(parse_byte_size("99999999999999999999"), std::nullopt);
    EXPECT_EQ(parse_byte_size("17179869184T"), std::nullopt);  // overflows 64 bits
    EXPECT_EQ(parse_cpu_quota("50%"), 50u);
    EXPECT_EQ(parse_cpu_quota("200%"), 200u);
    EXPECT_EQ(parse_cpu_quota("0%"), std::nullopt);
    EXPECT_EQ(parse_cpu_quota("50"), std::nullopt);
    EXPECT_EQ(parse_cpu_quota("%"), std::nullopt);
    EXPECT_EQ(parse_cpu_quota("5.5%"), std::nullopt);
}

TEST_F(ProfileConfig, ReadsEveryKeyOfAProfile) {
    Config c;
    std::string why;
    ASSERT_TRUE(load(R"(
user = "agent"
allowed_profiles = ["offline", "build"]
default_profile = "build"
[profiles.build]
memory_max = "4G"
tasks_max = 512
cpu_quota = "150%"
idle_timeout = 1800
[profiles.offline]
memory_max = 268435456
runtime_max = 600
network = "none"
filesystem = "read-only"
writable = ["cwd", "/srv/cache"]
hidden = ["/home/agent/.ssh"]
)",
                     c, why))
        << why;
    ASSERT_EQ(c.profiles.size(), 2u);
    const SandboxProfile& build = c.profiles.at("build");
    EXPECT_EQ(build.name, "build");
    EXPECT_EQ(build.memory_max, 4ull << 30);
    EXPECT_EQ(build.tasks_max, 512u);
    EXPECT_EQ(build.cpu_quota_percent, 150u);
    EXPECT_EQ(build.idle_timeout, std::chrono::seconds(1800));
    EXPECT_FALSE(build.runtime_max);
    EXPECT_EQ(build.network, SandboxProfile::Network::Host);
    EXPECT_FALSE(build.confines_filesystem());
    const SandboxProfile& offline = c.profiles.at("offline");
    EXPECT_EQ(offline.memory_max, 256ull << 20);
    EXPECT_EQ(offline.runtime_max, std::chrono::seconds(600));
    EXPECT_EQ(offline.network, SandboxProfile::Network::None);
    EXPECT_EQ(offline.filesystem, SandboxProfile::Filesystem::ReadOnly);
    EXPECT_TRUE(offline.writable_cwd);
    EXPECT_EQ(offline.writable, std::vector<std::string>{"/srv/cache"});
    EXPECT_EQ(offline.hidden, std::vector<std::string>{"/home/agent/.ssh"});
    EXPECT_EQ(c.default_profile, "build");
    EXPECT_EQ(c.allowed_profiles, (std::vector<std::string>{"offline", "build"}));
}

TEST_F(ProfileConfig, MistakesAreRefusedWithTheLine) {
    const struct {
        const char* text;
        const char* says;
    } cases[] = {
        {"[profiles.a]\nmemory_max = \"lots\"\n", "line 3"},
        {"[profiles.a]\nmemory_max = \"512K\"\n", "at least 1M"},
        {"[profiles.a]\ncpu_quota = 50\n", "cpu_quota"},
        {"[profiles.a]\nnetwork = \"private\"\n", "network"},
        {"[profiles.a]\nfilesystem = \"ro\"\n", "filesystem"},
        {"[profiles.a]\nfilesystem = \"read-only\"\nwritable = [\"relative/path\"]\n", "writable"},
        {"[profiles.a]\nfilesystem = \"read-only\"\nwritable = [\"/srv/../etc\"]\n", "writable"},
        {"[profiles.a]\nwritable = [\"cwd\"]\n", "needs filesystem"},
        {"[profiles.a]\nhidden = [\"/\"]\n", "hidden"},
        {"[profiles.a]\ntasks_max = 0\n", "tasks_max"},
        {"[profiles.a]\nruntime_max = -5\n", "runtime_max"},
        {"[profiles.a]\nswap = 1\n", "unknown key 'swap'"},
        {"[profiles.\"a b\"]\ntasks_max = 1\n", "profile name"},
        {"default_profile = \"missing\"\n", "default_profile 'missing'"},
        {"allowed_profiles = [\"missing\"]\n", "allowed_profiles names 'missing'"},
    };
    for (const auto& k : cases) {
        Config c;
        std::string why;
        EXPECT_FALSE(load(std::string("user = \"agent\"\n") + k.text, c, why)) << k.text;
        EXPECT_NE(why.find(k.says), std::string::npos) << k.text << " -> " << why;
    }
}

// A backend with no sandboxing of its own: Backend::check_profile's answer.
class PlainBackend : public backends::Backend {
public:
    std::string_view name() const override { return "plain"; }
    bool cleanup_orphans(backends::Clock::time_point, std::string&) override { return true; }
    std::unique_ptr<backends::SessionProcesses> start(backends::SessionSpec, backends::SessionEvents,
                                                      std::string&) override {
        return nullptr;
    }
    backends::PeerVerdict check_peer(const backends::Peer&, std::string&) override {
        return backends::PeerVerdict::Allowed;
    }
    void recheck(backends::RecheckCallback) override {}
};

// A backend that enforces only what it is told it can.
class FakeBackend final : public PlainBackend {
public:
    bool can_enforce = true;
    bool check_profile(const SandboxProfile& p, std::string& why) const override {
        if (can_enforce) return true;
        why = "no memory controller for " + p.name;
        return false;
    }
};

Config two_profiles() {
    Config c;
    c.profiles["build"].name = "build";
    c.profiles["build"].tasks_max = 64;
    c.profiles["secret"].name = "secret";
    c.profiles["open"].name = "open";
    c.allowed_profiles = {"open"};
    c.default_profile = "build";
    return c;
}

TEST(ProfileChoice, NoNameGetsTheDefaultAndNoDefaultGetsNone) {
    FakeBackend backend;
    Config c = two_profiles();
    auto choice = choose_profile(c, backend, "");
    ASSERT_FALSE(choice.error) << choice.why;
    ASSERT_TRUE(choice.profile);
    EXPECT_EQ(choice.profile->name, "build");
    c.default_profile.clear();
    choice = choose_profile(c, backend, "");
    EXPECT_FALSE(choice.error);
    EXPECT_FALSE(choice.profile);
}

TEST(ProfileChoice, AgentChoosesAnAllowedProfileOrTheDefault) {
    FakeBackend backend;
    const Config c = two_profiles();
    EXPECT_EQ(choose_profile(c, backend, "open").profile->name, "open");
    EXPECT_EQ(choose_profile(c, backend, "build").profile->name, "build");
}

TEST(ProfileChoice, AgentNamesAProfileItMayNotChooseOrThatDoesNotExist) {
    FakeBackend backend;
    const Config c = two_profiles();
    const auto secret = choose_profile(c, backend, "secret");
    const auto missing = choose_profile(c, backend, "missing");
    EXPECT_EQ(secret.error, protocol::ErrorCode::ProfileNotAllowed);
    EXPECT_EQ(missing.error, protocol::ErrorCode::ProfileNotAllowed);
    EXPECT_FALSE(secret.profile);
    EXPECT_NE(secret.why.find("allowed: open"), std::string::npos) << secret.why;
    // Whether a forbidden profile exists is not told.
    EXPECT_EQ(secret.why.substr(secret.why.find(" is not")), missing.why.substr(missing.why.find(" is not")));
}

TEST(ProfileChoice, AProfileTheHostCannotEnforceIsRefusedNotRunUnconfined) {
    FakeBackend backend;
    backend.can_enforce = false;
    const auto choice = choose_profile(two_profiles(), backend, "");
    EXPECT_EQ(choice.error, protocol::ErrorCode::ProfileUnavailable);
    EXPECT_FALSE(choice.profile);
    EXPECT_NE(choice.why.find("no memory controller"), std::string::npos) << choice.why;
}

TEST(ProfileChoice, ABackendWithoutSandboxingStillTakesTheServersOwnLimits) {
    // runtime_max and idle_timeout are the server's; the base Backend refuses the rest.
    PlainBackend plain;
    Config c = two_profiles();
    SandboxProfile timed;
    timed.name = "timed";
    timed.runtime_max = std::chrono::seconds(5);
    c.profiles["timed"] = timed;
    c.allowed_profiles.push_back("timed");
    EXPECT_FALSE(choose_profile(c, plain, "timed").error);
    EXPECT_EQ(choose_profile(c, plain, "build").error, protocol::ErrorCode::ProfileUnavailable);
}

}  // namespace
}  // namespace ptyvisor::server
