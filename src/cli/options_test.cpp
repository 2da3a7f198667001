#include "cli/options.h"

#include <gtest/gtest.h>

#include "client/default_socket.h"

namespace ptyvisor::cli {
namespace {

TEST(ParseSize, ColsThenRows) {
    EXPECT_EQ(parse_size("132x40"), (protocol::WindowSize{.rows = 40, .cols = 132}));
    EXPECT_EQ(parse_size("80X24"), (protocol::WindowSize{.rows = 24, .cols = 80}));
    EXPECT_EQ(parse_size("65535x1"), (protocol::WindowSize{.rows = 1, .cols = 65535}));
}

TEST(ParseSize, RejectsMalformedAndOutOfRange) {
    for (const char* bad : {"", "80", "x24", "80x", "0x24", "80x0", "65536x24", "80x24x1", "-80x24",
                            "80 x24", "8a0x24", "80x24 "})
        EXPECT_THROW(parse_size(bad), OptionError) << bad;
    try {
        parse_size("wide");
    } catch (const OptionError& e) {
        EXPECT_NE(std::string(e.what()).find("'wide'"), std::string::npos);
    }
}

TEST(BuildEnvironment, InheritedThenSettingsReplacingEarlierEntries) {
    const std::vector<std::string> inherited{"PATH=/bin", "HOME=/home/a", "PATH=/shadowed", "NOEQ"};
    const auto env = build_environment(inherited, false, {"HOME=/tmp", "NEW=x=y", "EMPTY="});
    EXPECT_EQ(env, (std::vector<std::string>{"PATH=/bin", "PATH=/shadowed", "HOME=/tmp", "NEW=x=y", "EMPTY="}));
}

TEST(BuildEnvironment, CleanStartsEmpty) {
    EXPECT_EQ(build_environment({"PATH=/bin"}, true, {"A=1"}), (std::vector<std::string>{"A=1"}));
    EXPECT_TRUE(build_environment({"PATH=/bin"}, true, {}).empty());
}

TEST(BuildEnvironment, RejectsSettingsThatAreNotNameValue) {
    EXPECT_THROW(build_environment({}, false, {"NOVALUE"}), OptionError);
    EXPECT_THROW(build_environment({}, false, {"=value"}), OptionError);
}

TEST(BuildEnvironment, LaterSettingWins) {
    EXPECT_EQ(build_environment({}, true, {"A=1", "B=2", "A=3"}), (std::vector<std::string>{"B=2", "A=3"}));
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
