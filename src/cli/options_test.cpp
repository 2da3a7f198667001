#include "cli/options.h"

#include <gtest/gtest.h>

#include "client/default_socket.h"

namespace ptyvisor::cli {
namespace {

// parse_size() that must succeed.
protocol::WindowSize size_of(std::string_view text) {
    protocol::WindowSize size{};
    std::string why;
    EXPECT_TRUE(parse_size(text, size, why)) << text << ": " << why;
    return size;
}

// build_environment() that must succeed.
std::vector<std::string> environment(const std::vector<std::string>& inherited, bool clean,
                                     const std::vector<std::string>& settings) {
    std::vector<std::string> env;
    std::string why;
    EXPECT_TRUE(build_environment(inherited, clean, settings, env, why)) << why;
    return env;
}

TEST(ParseSize, ColsThenRows) {
    EXPECT_EQ(size_of("132x40"), (protocol::WindowSize{.rows = 40, .cols = 132}));
    EXPECT_EQ(size_of("80X24"), (protocol::WindowSize{.rows = 24, .cols = 80}));
    EXPECT_EQ(size_of("65535x1"), (protocol::WindowSize{.rows = 1, .cols = 65535}));
}

TEST(ParseSize, RejectsMalformedAndOutOfRange) {
    for (const char* bad : {"", "80", "x24", "80x", "0x24", "80x0", "65536x24", "80x24x1", "-80x24",
                            "80 x24", "8a0x24", "80x24 "}) {
        protocol::WindowSize size{.rows = 7, .cols = 7};
        std::string why;
        EXPECT_FALSE(parse_size(bad, size, why)) << bad;
        EXPECT_NE(why.find(std::string("'") + bad + "'"), std::string::npos) << why;
        EXPECT_EQ(size, (protocol::WindowSize{.rows = 7, .cols = 7})) << "untouched on failure";
    }
}

TEST(BuildEnvironment, InheritedThenSettingsReplacingEarlierEntries) {
    const std::vector<std::string> inherited{"PATH=/bin", "HOME=/home/a", "PATH=/shadowed", "NOEQ"};
    const auto env = environment(inherited, false, {"HOME=/tmp", "NEW=x=y", "EMPTY="});
    EXPECT_EQ(env, (std::vector<std::string>{"PATH=/bin", "PATH=/shadowed", "HOME=/tmp", "NEW=x=y", "EMPTY="}));
}

TEST(BuildEnvironment, CleanStartsEmpty) {
    EXPECT_EQ(environment({"PATH=/bin"}, true, {"A=1"}), (std::vector<std::string>{"A=1"}));
    EXPECT_TRUE(environment({"PATH=/bin"}, true, {}).empty());
}

TEST(BuildEnvironment, RejectsSettingsThatAreNotNameValue) {
    for (const std::string bad : {"NOVALUE", "=value"}) {
        std::vector<std::string> env;
        std::string why;
        EXPECT_FALSE(build_environment({}, false, {bad}, env, why)) << bad;
        EXPECT_EQ(why, "-e expects NAME=VALUE, got '" + bad + "'");
    }
}

TEST(BuildEnvironment, LaterSettingWins) {
    EXPECT_EQ(environment({}, true, {"A=1", "B=2", "A=3"}), (std::vector<std::string>{"B=2", "A=3"}));
}

TEST(Variables, FindAndSet) {
    std::vector<std::string> env{"TERMINAL=x", "TERM=vt100", "TERM=later"};
    EXPECT_EQ(find_variable(env, "TERM"), "vt100");
    EXPECT_EQ(find_variable(env, "TER"), std::nullopt);
    set_variable(env, "TERM", "xterm");
    EXPECT_EQ(env, (std::vector<std::string>{"TERMINAL=x", "TERM=xterm"}));
}

TEST(ResolveTerm, FlagThenSettingThenClientThenDumb) {
    EXPECT_EQ(resolve_term(std::string("screen"), {"TERM=vt100"}, "xterm"), "screen");
    EXPECT_EQ(resolve_term(std::nullopt, {"TERM=vt100"}, "xterm"), "vt100");
    EXPECT_EQ(resolve_term(std::nullopt, {}, "xterm"), "xterm");
    EXPECT_EQ(resolve_term(std::nullopt, {}, nullptr), "dumb");
    EXPECT_EQ(resolve_term(std::nullopt, {"TERM="}, ""), "dumb");
}

TEST(ResolveSocketPath, FlagThenEnvironmentThenDefault) {
    EXPECT_EQ(resolve_socket_path(std::string("/a.sock"), "/b.sock"), "/a.sock");
    EXPECT_EQ(resolve_socket_path(std::nullopt, "/b.sock"), "/b.sock");
    EXPECT_EQ(resolve_socket_path(std::nullopt, ""), client::kDefaultSocketPath);
    EXPECT_EQ(resolve_socket_path(std::nullopt, nullptr), "/run/ptyvisor/ptyvisor.sock");
}

}  // namespace
}  // namespace ptyvisor::cli
