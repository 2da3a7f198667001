#include "server/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace ptyvisor::server {
namespace {

class ConfigFile : public ::testing::Test {
protected:
    std::string write(const std::string& text) {
        char name[] = "/tmp/ptyvisor-config-XXXXXX";
        const int fd = ::mkstemp(name);
        ::close(fd);
        path_ = name;
        std::ofstream(path_) << text;
        return path_;
    }
    void TearDown() override {
        if (!path_.empty()) ::unlink(path_.c_str());
    }
    std::string path_;
};

TEST(ConfigDefaults, AreThePilotConstants) {
    const Config c;
    EXPECT_EQ(c.limits.max_sessions, 16u);
    EXPECT_EQ(c.limits.max_unauthenticated, 32u);
    EXPECT_EQ(c.limits.admissions_per_minute, 120u);
    EXPECT_EQ(c.limits.socket_buffer_bytes, 128u * 1024);
    EXPECT_DOUBLE_EQ(c.timeouts.handshake.count(), 5.0);
}

TEST_F(ConfigFile, ReadsEveryKey) {
    Config c;
    const auto error = load_config_file(write(R"(
user = "byk"
socket = "/run/opencode-pty/supervisor.sock"
backend = "systemd"
allow_units = ["opencode.service"]
unit_prefix = "opencode-pty"
state_directory = "/var/lib/x"
[limits]
max_sessions = 4
max_unauthenticated = 8
max_unauthenticated_per_peer = 2
admissions_per_minute = 60
socket_buffer_bytes = 65536
held_input_bytes = 8192
output_buffer_bytes = 131072
[timeouts]
handshake = 1.5
operation = 3
drain = 0.25
cleanup = 20
[session.properties]
MemoryMax = "1G"
TasksMax = 256
NoNewPrivileges = true
)"), c);
    ASSERT_FALSE(error) << *error;
    EXPECT_EQ(c.user, "byk");
    EXPECT_EQ(c.socket, "/run/opencode-pty/supervisor.sock");
    EXPECT_EQ(c.backend, "systemd");
    EXPECT_EQ(c.allow_units, std::vector<std::string>{"opencode.service"});
    EXPECT_EQ(c.unit_prefix, "opencode-pty");
    EXPECT_EQ(c.limits.max_sessions, 4u);
    EXPECT_EQ(c.limits.output_buffer_bytes, 131072u);
    EXPECT_DOUBLE_EQ(c.timeouts.handshake.count(), 1.5);
    EXPECT_DOUBLE_EQ(c.timeouts.drain.count(), 0.25);
    EXPECT_EQ(c.session_properties.at("MemoryMax"), "1G");
    EXPECT_EQ(c.session_properties.at("TasksMax"), "256");
    EXPECT_EQ(c.session_properties.at("NoNewPrivileges"), "yes");
    EXPECT_FALSE(validate(c));
}

TEST_F(ConfigFile, SyntaxErrorNamesTheLine) {
    Config c;
    const auto error = load_config_file(write("user = \"byk\"\n\nsocket = \n"), c);
    ASSERT_TRUE(error);
    EXPECT_NE(error->find("line 3"), std::string::npos) << *error;
}

TEST_F(ConfigFile, UnknownKeyIsRefusedWithItsLine) {
    Config c;
    const auto error = load_config_file(write("user = \"byk\"\n[limits]\nmax_sesions = 3\n"), c);
    ASSERT_TRUE(error);
    EXPECT_NE(error->find("unknown key 'max_sesions'"), std::string::npos) << *error;
    EXPECT_NE(error->find("line 3"), std::string::npos) << *error;
}

TEST_F(ConfigFile, WrongTypeAndRangeAreRefused) {
    Config c;
    auto error = load_config_file(write("[limits]\nmax_sessions = \"many\"\n"), c);
    ASSERT_TRUE(error);
    EXPECT_NE(error->find("must be an integer"), std::string::npos) << *error;
    error = load_config_file(write("[limits]\nmax_sessions = 0\n"), c);
    ASSERT_TRUE(error);
    EXPECT_NE(error->find("between"), std::string::npos) << *error;
    error = load_config_file(write("[timeouts]\nhandshake = -1\n"), c);
    ASSERT_TRUE(error);
    EXPECT_NE(error->find("seconds"), std::string::npos) << *error;
}

TEST_F(ConfigFile, MissingFileIsAnError) {
    Config c;
    EXPECT_TRUE(load_config_file("/nonexistent/ptyvisord.toml", c));
}

TEST(ConfigValidate, RefusesInconsistentValues) {
    Config c;
    EXPECT_TRUE(validate(c));  // no user
    c.user = "byk";
    EXPECT_FALSE(validate(c));
    c.backend = "docker";
    EXPECT_TRUE(validate(c));
    c.backend = "auto";
    c.socket = "relative.sock";
    EXPECT_TRUE(validate(c));
    c.socket = "/run/x.sock";
    c.unit_prefix = "bad prefix";
    EXPECT_TRUE(validate(c));
    c.unit_prefix = "ptyvisor";
    c.allow_units = {"opencode"};
    EXPECT_TRUE(validate(c));
    c.allow_units = {"opencode.service"};
    c.limits.max_unauthenticated_per_peer = 64;
    EXPECT_TRUE(validate(c));
}

}  // namespace
}  // namespace ptyvisor::server
