#include "cli/options.h"

#include <signal.h>

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

TEST(CheckSessionId, ThirtyTwoLowercaseHexDigits) {
    std::string why;
    EXPECT_TRUE(check_session_id("0123456789abcdef0123456789abcdef", why)) << why;
    for (const std::string bad : {"", "0123456789abcdef", "0123456789ABCDEF0123456789ABCDEF",
                                  "0123456789abcdef0123456789abcdeg", "0123456789abcdef0123456789abcdef0"}) {
        EXPECT_FALSE(check_session_id(bad, why)) << bad;
        EXPECT_NE(why.find("'" + bad + "'"), std::string::npos) << why;
    }
}

TEST(ParseLogPosition, StartTailOrAnOffset) {
    using Kind = protocol::LogPosition::Kind;
    protocol::LogPosition p;
    std::string why;
    ASSERT_TRUE(parse_log_position("start", p, why));
    EXPECT_EQ(p, (protocol::LogPosition{Kind::Start, 0}));
    ASSERT_TRUE(parse_log_position("tail", p, why));
    EXPECT_EQ(p, (protocol::LogPosition{Kind::Tail, 0}));
    ASSERT_TRUE(parse_log_position("0", p, why));
    EXPECT_EQ(p, (protocol::LogPosition{Kind::Offset, 0}));
    ASSERT_TRUE(parse_log_position("18446744073709551615", p, why));
    EXPECT_EQ(p, (protocol::LogPosition{Kind::Offset, 18446744073709551615ull}));
    for (const std::string bad : {"", "Start", "end", "-1", "1e3", "12 ", "18446744073709551616", "0x10"}) {
        p = {Kind::Tail, 7};
        EXPECT_FALSE(parse_log_position(bad, p, why)) << bad;
        EXPECT_NE(why.find("'" + bad + "'"), std::string::npos) << why;
        EXPECT_EQ(p, (protocol::LogPosition{Kind::Tail, 7})) << "untouched on failure";
    }
}

TEST(ParseWaitCondition, ExitQuietOrText) {
    using For = protocol::WaitRequest::For;
    protocol::WaitRequest w;
    std::string why;
    ASSERT_TRUE(parse_wait_condition("quiet:500", w, why)) << why;
    EXPECT_EQ(w.what, For::Quiet);
    EXPECT_EQ(w.quiet_ms, 500u);
    ASSERT_TRUE(parse_wait_condition("text:listening on [0-9]+", w, why)) << why;
    EXPECT_EQ(w.what, For::Text);
    EXPECT_EQ(w.pattern, "listening on [0-9]+");
    ASSERT_TRUE(parse_wait_condition("text:a:b", w, why)) << why;
    EXPECT_EQ(w.pattern, "a:b") << "only the first colon separates";
    ASSERT_TRUE(parse_wait_condition("exit", w, why)) << why;
    EXPECT_EQ(w.what, For::Exit);
    ASSERT_TRUE(parse_wait_condition("quiet:86400000", w, why)) << why;
    for (const std::string bad : {"", "exit:1", "quiet", "quiet:", "quiet:0", "quiet:86400001", "quiet:1s", "text:",
                                  "Exit", "output:x"}) {
        EXPECT_FALSE(parse_wait_condition(bad, w, why)) << bad;
        EXPECT_FALSE(why.empty());
    }
    EXPECT_FALSE(parse_wait_condition("text:" + std::string(1025, 'x'), w, why));
    EXPECT_TRUE(parse_wait_condition("text:" + std::string(1024, 'x'), w, why)) << why;
}

TEST(ParseWaitCondition, TheConditionsOfVersion4) {
    using For = protocol::WaitRequest::For;
    protocol::WaitRequest w;
    std::string why;
    ASSERT_TRUE(parse_wait_condition("command", w, why)) << why;
    EXPECT_EQ(w.what, For::Command);
    ASSERT_TRUE(parse_wait_condition("prompt", w, why)) << why;
    EXPECT_EQ(w.what, For::Prompt);
    ASSERT_TRUE(parse_wait_condition("input", w, why)) << why;
    EXPECT_EQ(w.what, For::Input);
    for (const std::string bad : {"command:1", "Input", "inputs", "prompt:"}) {
        EXPECT_FALSE(parse_wait_condition(bad, w, why)) << bad;
        EXPECT_NE(why.find("input"), std::string::npos) << "the message names the new conditions: " << why;
    }
}

TEST(ParseCommandSeq, ADecimalSeq) {
    std::uint64_t seq = 9;
    std::string why;
    ASSERT_TRUE(parse_command_seq("0", seq, why)) << why;
    EXPECT_EQ(seq, 0u);
    ASSERT_TRUE(parse_command_seq("41", seq, why)) << why;
    EXPECT_EQ(seq, 41u);
    for (const std::string bad : {"", "-1", "1.5", "x", "18446744073709551616"}) {
        EXPECT_FALSE(parse_command_seq(bad, seq, why)) << bad;
        EXPECT_NE(why.find("--after"), std::string::npos) << why;
    }
}

TEST(ExecLine, JoinsTheWordsBySpacesAsSshDoes) {
    std::string line, why;
    ASSERT_TRUE(exec_line({"echo", "a  b", "$HOME"}, line, why)) << why;
    EXPECT_EQ(line, "echo a  b $HOME");
    ASSERT_TRUE(exec_line({"printf '%s\\n' x | wc -c"}, line, why)) << why;
    EXPECT_EQ(line, "printf '%s\\n' x | wc -c");
    ASSERT_TRUE(exec_line({"echo", "\tq"}, line, why)) << why;
}

TEST(ExecLine, RefusesWhatIsNotOneLine) {
    std::string line = "kept", why;
    EXPECT_FALSE(exec_line({}, line, why));
    EXPECT_FALSE(exec_line({"", " "}, line, why));
    EXPECT_FALSE(exec_line({"echo a\necho b"}, line, why));
    EXPECT_NE(why.find("cannot run"), std::string::npos) << why;
    EXPECT_FALSE(exec_line({"echo \x1b[1m"}, line, why));
    EXPECT_FALSE(exec_line({std::string(16385, 'x')}, line, why));
    EXPECT_FALSE(exec_line({"echo \xff"}, line, why));
    EXPECT_EQ(line, "kept") << "nothing is written on failure";
    EXPECT_TRUE(exec_line({std::string(16384, 'x')}, line, why)) << why;
}

TEST(ParseTimeoutSeconds, SecondsIntoMilliseconds) {
    std::uint64_t ms = 7;
    std::string why;
    ASSERT_TRUE(parse_timeout_seconds("30", ms, why)) << why;
    EXPECT_EQ(ms, 30000u);
    ASSERT_TRUE(parse_timeout_seconds("0.5", ms, why)) << why;
    EXPECT_EQ(ms, 500u);
    ASSERT_TRUE(parse_timeout_seconds("0", ms, why)) << why;
    EXPECT_EQ(ms, 0u);
    ASSERT_TRUE(parse_timeout_seconds(".25", ms, why)) << why;
    EXPECT_EQ(ms, 250u);
    ASSERT_TRUE(parse_timeout_seconds("0.0001", ms, why)) << why;
    EXPECT_EQ(ms, 1u) << "rounded up: a timeout never shorter than asked";
    ASSERT_TRUE(parse_timeout_seconds("86400", ms, why)) << why;
    EXPECT_EQ(ms, 86400000u);
    for (const std::string bad : {"", ".", "-1", "1e3", "inf", "nan", "86400.5", "1s", " 1", "1.2.3"}) {
        ms = 7;
        EXPECT_FALSE(parse_timeout_seconds(bad, ms, why)) << bad;
        EXPECT_NE(why.find("'" + bad + "'"), std::string::npos) << why;
        EXPECT_EQ(ms, 7u) << "untouched on failure";
    }
}

TEST(ParseSignal, NamesWithOrWithoutSigAndNumbers) {
    const auto signal_of = [](std::string_view text) {
        int sig = -1;
        std::string why;
        EXPECT_TRUE(parse_signal(text, sig, why)) << text << ": " << why;
        return sig;
    };
    EXPECT_EQ(signal_of("TERM"), SIGTERM);
    EXPECT_EQ(signal_of("SIGTERM"), SIGTERM);
    EXPECT_EQ(signal_of("int"), SIGINT);
    EXPECT_EQ(signal_of("sigkill"), SIGKILL);
    EXPECT_EQ(signal_of("HUP"), SIGHUP);
    EXPECT_EQ(signal_of("USR1"), SIGUSR1);
    EXPECT_EQ(signal_of("WINCH"), SIGWINCH);
    EXPECT_EQ(signal_of("9"), 9);
    EXPECT_EQ(signal_of("64"), 64);
    EXPECT_EQ(signal_of("RTMIN"), SIGRTMIN);
    EXPECT_EQ(signal_of("RTMIN+2"), SIGRTMIN + 2);
    EXPECT_EQ(signal_of("SIGRTMAX-1"), SIGRTMAX - 1);
    for (const std::string bad : {"", "0", "65", "-9", "SIG", "TERMINATE", "SIGSIGTERM", "RTMIN+", "RTMAX+1"}) {
        int sig = -1;
        std::string why;
        EXPECT_FALSE(parse_signal(bad, sig, why)) << bad;
        EXPECT_EQ(sig, -1) << bad;
        EXPECT_NE(why.find("'" + bad + "'"), std::string::npos) << why;
    }
}

}  // namespace
}  // namespace ptyvisor::cli
