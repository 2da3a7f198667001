// Command-aware sessions through the CLI (protocol version 4): `run --shell-integration`,
// `exec`, `commands`, `wait --for command|prompt|input` and `ls --json`'s new members, against
// the real daemon, under bash and under zsh. Each exec's output and status are compared with
// what `sh -c` gives for the same line (the terminal's "\r\n" made "\n").
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "protocol/session_payloads.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

constexpr Millis kExit{60000};

std::string crlf_to_lf(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i)
        if (!(s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n')) out += s[i];
    return out;
}

struct Reference {
    int status = -1;
    std::string out;
};

// What `sh -c LINE` prints, stdout and stderr together as a terminal carries them, and how
// it exits, here.
Reference sh_c(const std::string& line) {
    Reference r;
    const std::string command = "sh -c '" + [&] {
        std::string q;
        for (const char c : line) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        return q;
    }() + "' 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return r;
    char buffer[65536];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.out.append(buffer, n);
    const int status = ::pclose(pipe);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
}

class CliCommands : public EndToEnd, public ::testing::WithParamInterface<std::string> {
protected:
    struct Result {
        int status = -1;
        std::string out, err, transcript;
    };

    Result cli(const std::vector<std::string>& args, Millis timeout = kExit) {
        auto c = run_cli(args, ClientOptions::Stdin::Null);
        if (!c) return {};
        const auto exit = c->wait_exit(timeout);
        if (!exit) ADD_FAILURE() << "the CLI did not exit; " << c->transcript();
        return {exit ? exit->shell() : -1, c->out(), c->err(), c->transcript()};
    }

    // A detached session of `shell`, with or without its integration, at its first prompt.
    std::string start_shell(const std::string& shell, bool integration = true) {
        // A UTF-8 locale, as a person's terminal has: zsh in the C locale takes the bytes of
        // "é" for pattern characters.
        std::vector<std::string> args{"run", "--detach", "-e", "LANG=C.UTF-8", "-e", "LC_ALL=C.UTF-8"};
        if (integration) args.push_back("--shell-integration");
        args.insert(args.end(), {"--", shell});
        const auto r = cli(args);
        EXPECT_EQ(r.status, 0) << r.transcript;
        if (r.out.size() != 33) {
            ADD_FAILURE() << "run --detach printed no id; " << r.transcript;
            return {};
        }
        const std::string id = r.out.substr(0, 32);
        if (integration) {
            const auto w = cli({"wait", "--timeout", "20", "--for", "prompt", id});
            EXPECT_EQ(w.status, 0) << "the shell reaches its prompt; " << w.transcript;
        }
        return id;
    }

    Result exec(const std::string& id, const std::string& line, std::vector<std::string> flags = {}) {
        std::vector<std::string> args{"exec"};
        args.insert(args.end(), flags.begin(), flags.end());
        args.insert(args.end(), {id, "--", line});
        return cli(args);
    }

    // exec of `line` prints what sh -c prints and exits as it does.
    void expect_like_sh(const std::string& id, const std::string& line) {
        const auto want = sh_c(line);
        const auto got = exec(id, line, {"--timeout", "30"});
        EXPECT_EQ(got.status, want.status) << line << "; " << got.err;
        EXPECT_EQ(crlf_to_lf(got.out), want.out) << line;
        EXPECT_EQ(got.err, "") << line;
    }

    nlohmann::json json_of(const Result& r) {
        auto j = nlohmann::json::parse(r.out, nullptr, false);
        EXPECT_TRUE(j.is_object()) << r.transcript;
        return j.is_object() ? j : nlohmann::json::object();
    }
};

TEST_P(CliCommands, ExecGivesWhatShCGives) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam());
    ASSERT_FALSE(id.empty());
    for (const std::string line : {"true", "false", "(exit 7)", "printf abc", "printf 'two\\nlines\\n'",
                                   "echo 'h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xf0\x9f\x99\x82'",
                                   "echo out; echo err >&2; (exit 3)", "cd / && pwd"})
        expect_like_sh(id, line);
    // cd stays: the shell is the same from one exec to the next.
    const auto pwd = exec(id, "pwd");
    EXPECT_EQ(pwd.status, 0) << pwd.transcript;
    EXPECT_EQ(crlf_to_lf(pwd.out), "/\n");
}

TEST_P(CliCommands, ExecReadsAMebibyteOfOutputWhole) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam());
    ASSERT_FALSE(id.empty());
    const std::string line = "head -c 1048576 /dev/zero | tr '\\0' x";
    const auto plain = exec(id, line);
    EXPECT_EQ(plain.status, 0) << plain.err;
    EXPECT_EQ(plain.out.size(), 1048576u);
    EXPECT_TRUE(plain.out == std::string(1048576, 'x')) << "1 MiB of x, nothing else";
    const auto j = json_of(exec(id, line, {"--json"}));
    EXPECT_EQ(j.value("state", ""), "exited");
    EXPECT_EQ(j.value("exit_code", -1), 0);
    EXPECT_EQ(j.value("truncated", true), false);
    EXPECT_TRUE(j.value("output", std::string()) == std::string(1048576, 'x')) << "1 MiB of x, nothing else";
    EXPECT_EQ(j.value("seq", 0), 2) << "the second command of the session";
}

TEST_P(CliCommands, ExecJsonCarriesTheStatusTheOutputAndTheSeq) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam());
    ASSERT_FALSE(id.empty());
    auto j = json_of(exec(id, "printf 'a\\nb'; (exit 4)", {"--json"}));
    EXPECT_EQ(j, nlohmann::json::parse(R"({"exit_code":4,"state":"exited","output":"a\r\nb","truncated":false,"seq":1})"));
    j = json_of(exec(id, "printf '\\377ok'", {"--json"}));
    EXPECT_EQ(j.value("output", std::string()), "\xEF\xBF\xBDok") << "an invalid byte becomes U+FFFD";
}

TEST_P(CliCommands, ACommandThatReadsIsReportedThenAnsweredAndWaitedFor) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam());
    ASSERT_FALSE(id.empty());
    ASSERT_EQ(exec(id, "true").status, 0);
    const auto r = exec(id, "printf 'name? '; read answer; echo got $answer");
    EXPECT_EQ(r.status, 125) << r.transcript;
    EXPECT_EQ(r.out, "name? ");
    EXPECT_NE(r.err.find("waits for input"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ptyvisor send " + id), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("wait --for command --after 1 " + id), std::string::npos) << r.err;

    // While it waits: ls says so, commands shows it running, wait --for input holds.
    EXPECT_EQ(cli({"wait", "--timeout", "10", "--for", "input", id}).status, 0);
    const auto ls = cli({"ls", "--json"});
    bool listed = false;
    for (const auto& s : nlohmann::json::parse(ls.out, nullptr, false)) {
        if (s.value("id", "") != id) continue;
        listed = true;
        EXPECT_EQ(s.value("waiting_for_input", false), true) << s.dump();
        EXPECT_EQ(s.value("shell", ""), GetParam()) << s.dump();
        EXPECT_EQ(s["last_command"].value("seq", 0), 2) << s.dump();
        EXPECT_EQ(s["last_command"].value("running", false), true) << s.dump();
        EXPECT_TRUE(s["last_command"]["exit_code"].is_null()) << s.dump();
    }
    EXPECT_TRUE(listed) << ls.transcript;

    ASSERT_EQ(cli({"send", id, "yes\r"}).status, 0);
    const auto w = cli({"wait", "--timeout", "20", "--for", "command", "--after", "1", id});
    EXPECT_EQ(w.status, 0) << w.transcript;
    const auto record = nlohmann::json::parse(w.out, nullptr, false);
    EXPECT_EQ(record.value("seq", 0), 2) << w.out;
    EXPECT_EQ(record.value("exit_code", -1), 0) << w.out;

    const auto c = cli({"commands", "--json", id});
    const auto list = nlohmann::json::parse(c.out, nullptr, false);
    ASSERT_TRUE(list.is_object()) << c.transcript;
    ASSERT_EQ(list["commands"].size(), 2u) << c.out;
    EXPECT_EQ(list["commands"][1].value("command", ""), "printf 'name? '; read answer; echo got $answer");
    const auto table = cli({"commands", "--since", "1", id});
    EXPECT_EQ(table.status, 0) << table.transcript;
    EXPECT_EQ(table.out.find("true\n"), std::string::npos) << "--since 1 leaves out the first; " << table.out;
    EXPECT_NE(table.out.find("read answer"), std::string::npos) << table.out;
}

TEST_P(CliCommands, TimeoutLeavesTheCommandRunningAndInterruptEndsIt) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam());
    ASSERT_FALSE(id.empty());
    const auto t = exec(id, "sleep 2; echo done", {"--timeout", "0.5"});
    EXPECT_EQ(t.status, 124) << t.transcript;
    EXPECT_NE(t.err.find("still runs"), std::string::npos) << t.err;
    const auto w = cli({"wait", "--timeout", "20", "--for", "command", "--after", "0", id});
    EXPECT_EQ(w.status, 0) << w.transcript;

    const auto i = exec(id, "sleep 100", {"--timeout", "0.5", "--interrupt"});
    EXPECT_EQ(i.status, 130) << i.transcript;
    const auto j = json_of(exec(id, "sleep 100", {"--timeout", "0.5", "--interrupt", "--json"}));
    EXPECT_EQ(j.value("state", ""), "exited");
    EXPECT_EQ(j.value("interrupted", false), true);
    EXPECT_EQ(j.value("exit_code", 0), 130);
    // The shell is fine afterwards.
    expect_like_sh(id, "echo after");
}

TEST_P(CliCommands, ASecondExecWhileOneRunsIsBusy) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam());
    ASSERT_FALSE(id.empty());
    auto first = run_cli({"exec", id, "--", "sleep 3; echo first"}, ClientOptions::Stdin::Null);
    ASSERT_NE(first, nullptr);
    // Until the daemon has the first one running (its command record started).
    bool running = false;
    for (int i = 0; i < 200 && !running; ++i) {
        const auto c = cli({"commands", "--json", id});
        running = !nlohmann::json::parse(c.out, nullptr, false).value("current", nlohmann::json()).is_null();
        if (!running) std::this_thread::sleep_for(Millis(25));
    }
    ASSERT_TRUE(running);
    const auto second = exec(id, "echo second");
    EXPECT_EQ(second.status, 255) << second.transcript;
    EXPECT_NE(second.err.find("busy"), std::string::npos) << second.err;
    const auto exit = first->wait_exit(kExit);
    ASSERT_TRUE(exit.has_value());
    EXPECT_EQ(exit->shell(), 0);
    EXPECT_EQ(crlf_to_lf(first->out()), "first\n");
}

TEST_P(CliCommands, ASessionWithoutIntegrationRefusesExec) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam(), /*integration=*/false);
    ASSERT_FALSE(id.empty());
    const auto r = exec(id, "true");
    EXPECT_EQ(r.status, 255) << r.transcript;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("no_shell_integration"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--shell-integration"), std::string::npos) << r.err;
    // wait --for input needs no integration: the kernel tells.
    EXPECT_EQ(cli({"wait", "--timeout", "20", "--for", "input", id}).status, 0);
}

TEST_P(CliCommands, ExecOfAnUnknownSessionFails) {
    ASSERT_NE(start_daemon(), nullptr);
    const auto r = exec(std::string(32, '0'), "true");
    EXPECT_EQ(r.status, 255) << r.transcript;
    EXPECT_NE(r.err.find("no_such_session"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Shells, CliCommands, ::testing::Values("bash", "zsh"),
                         [](const ::testing::TestParamInfo<std::string>& shell) { return shell.param; });

}  // namespace
}  // namespace ptyvisor::itest
