#include "server/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

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
    std::string why;
    const bool ok = load_config_file(write(R"(
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
)"), c, why);
    ASSERT_TRUE(ok) << why;
    EXPECT_EQ(why, "");
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
    EXPECT_TRUE(validate(c, why)) << why;
}

TEST_F(ConfigFile, RecordingIsOffByDefaultAndReadFromItsTable) {
    const Config defaults;
    EXPECT_EQ(defaults.recording.directory, "");
    EXPECT_EQ(defaults.recording.max_bytes, 64u * 1024 * 1024);
    EXPECT_EQ(defaults.recording.retention, std::chrono::seconds(7 * 24 * 3600));
    Config c;
    std::string why;
    ASSERT_TRUE(load_config_file(write("user = \"byk\"\n[recording]\ndirectory = \"/var/log/ptyvisor\"\n"
                                       "max_bytes = 1099511627776\nretention = 0\n"),
                                 c, why))
        << why;
    EXPECT_EQ(c.recording.directory, "/var/log/ptyvisor");
    EXPECT_EQ(c.recording.max_bytes, 1099511627776u);
    EXPECT_EQ(c.recording.retention, std::chrono::seconds(0));  // kept forever
    EXPECT_TRUE(validate(c, why)) << why;
    for (const char* wrong : {"max_bytes = 4095", "max_bytes = 1099511627777", "retention = -1", "retention = 1.5",
                              "directory = 1", "dir = \"/x\""}) {
        Config w;
        EXPECT_FALSE(load_config_file(write(std::string("[recording]\n") + wrong + "\n"), w, why)) << wrong;
        EXPECT_NE(why.find("line 2"), std::string::npos) << why;
    }
    c.recording.directory = "relative/recordings";
    EXPECT_FALSE(validate(c, why));
    EXPECT_NE(why.find("[recording] directory must be an absolute path"), std::string::npos) << why;
}

TEST_F(ConfigFile, ScreenIsOnByDefaultAndReadFromItsTable) {
    const Config defaults;
    EXPECT_TRUE(defaults.screen.enabled);
    EXPECT_EQ(defaults.screen.user, "");  // a uid of its own
    EXPECT_GT(defaults.screen.reply_timeout.count(), 0);
    Config c;
    std::string why;
    ASSERT_TRUE(load_config_file(write("user = \"byk\"\n[screen]\nenabled = false\nuser = \"screen\"\nreply_timeout = 2.5\n"),
                                 c, why))
        << why;
    EXPECT_FALSE(c.screen.enabled);
    EXPECT_EQ(c.screen.user, "screen");
    EXPECT_DOUBLE_EQ(c.screen.reply_timeout.count(), 2.5);
    for (const char* wrong : {"reply_timeout = 0", "reply_timeout = 3601", "reply_timeout = \"5\"", "enabled = 1"}) {
        Config w;
        EXPECT_FALSE(load_config_file(write(std::string("[screen]\n") + wrong + "\n"), w, why)) << wrong;
        EXPECT_NE(why.find("line 2"), std::string::npos) << why;
    }
}

TEST_F(ConfigFile, SyntaxErrorNamesTheLine) {
    Config c;
    std::string why;
    ASSERT_FALSE(load_config_file(write("user = \"byk\"\n\nsocket = \n"), c, why));
    EXPECT_NE(why.find(path_ + ": line 3"), std::string::npos) << why;
}

TEST_F(ConfigFile, UnknownKeyIsRefusedWithItsLine) {
    Config c;
    std::string why;
    ASSERT_FALSE(load_config_file(write("user = \"byk\"\n[limits]\nmax_sesions = 3\n"), c, why));
    EXPECT_NE(why.find("unknown key 'max_sesions'"), std::string::npos) << why;
    EXPECT_NE(why.find("line 3"), std::string::npos) << why;
}

TEST_F(ConfigFile, WrongTypeAndRangeAreRefused) {
    Config c;
    std::string why;
    ASSERT_FALSE(load_config_file(write("[limits]\nmax_sessions = \"many\"\n"), c, why));
    EXPECT_NE(why.find("must be an integer"), std::string::npos) << why;
    ASSERT_FALSE(load_config_file(write("[limits]\nmax_sessions = 0\n"), c, why));
    EXPECT_NE(why.find("between"), std::string::npos) << why;
    ASSERT_FALSE(load_config_file(write("[timeouts]\nhandshake = -1\n"), c, why));
    EXPECT_NE(why.find("seconds"), std::string::npos) << why;
}

// Of several mistakes, the first is reported: the others often follow from it.
TEST_F(ConfigFile, TheFirstMistakeIsReported) {
    Config c;
    std::string why;
    ASSERT_FALSE(load_config_file(write("user = 1\nsocket = 2\n"), c, why));
    EXPECT_NE(why.find("line 1"), std::string::npos) << why;
    EXPECT_NE(why.find("'user' must be a string"), std::string::npos) << why;
    EXPECT_EQ(why.find("socket"), std::string::npos) << why;
}

TEST_F(ConfigFile, MissingFileIsAnError) {
    Config c;
    std::string why;
    EXPECT_FALSE(load_config_file("/nonexistent/ptyvisord.toml", c, why));
    EXPECT_NE(why.find("/nonexistent/ptyvisord.toml"), std::string::npos) << why;
}

TEST(ConfigValidate, RefusesInconsistentValues) {
    Config c;
    std::string why;
    EXPECT_FALSE(validate(c, why));  // no user
    EXPECT_NE(why.find("no account configured"), std::string::npos) << why;
    c.user = "byk";
    EXPECT_TRUE(validate(c, why)) << why;
    c.backend = "docker";
    EXPECT_FALSE(validate(c, why));
    EXPECT_NE(why.find("'docker'"), std::string::npos) << why;
    c.backend = "auto";
    c.socket = "relative.sock";
    EXPECT_FALSE(validate(c, why));
    c.socket = "/run/x.sock";
    c.unit_prefix = "bad prefix";
    EXPECT_FALSE(validate(c, why));
    c.unit_prefix = "ptyvisor";
    c.allow_units = {"opencode"};
    EXPECT_FALSE(validate(c, why));
    EXPECT_NE(why.find("'opencode'"), std::string::npos) << why;
    c.allow_units = {"opencode.service"};
    c.limits.max_unauthenticated_per_peer = 64;
    EXPECT_FALSE(validate(c, why));
    EXPECT_NE(why.find("max_unauthenticated_per_peer"), std::string::npos) << why;
}

// The forms validate() accepts for unit_prefix and allow_units (once regular expressions).
TEST(ConfigValidate, UnitNameForms) {
    Config c;
    c.user = "byk";
    std::string why;
    for (const std::string& p : std::vector<std::string>{"p", "_x", "0", "opencode-pty", "a.b_c-d", std::string(31, 'p')}) {
        c.unit_prefix = p;
        EXPECT_TRUE(validate(c, why)) << p << ": " << why;
    }
    for (const std::string& p : std::vector<std::string>{"", "-x", ".x", "a b", "a/b", "a\\b", "a@b", std::string(32, 'p')}) {
        c.unit_prefix = p;
        EXPECT_FALSE(validate(c, why)) << p;
    }
    c.unit_prefix = "ptyvisor";
    for (const std::string& u : std::vector<std::string>{"a.service", "opencode.service", "getty@tty1.service", "a:b.service",
                                "foo\\x2dbar.service", "-.service", "a.b.service"}) {
        c.allow_units = {u};
        EXPECT_TRUE(validate(c, why)) << u << ": " << why;
    }
    for (const std::string& u : std::vector<std::string>{".service", "service", "a.socket", "a .service", "a/b.service",
                                "a.service ", "a.service\n", std::string("a\0b.service", 11)}) {
        c.allow_units = {u};
        EXPECT_FALSE(validate(c, why)) << u;
    }
}

}  // namespace
}  // namespace ptyvisor::server
