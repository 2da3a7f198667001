// Protocol version 4, command-aware sessions (docs/protocol.md, section 11), against the real
// daemon and a real bash and zsh with the shipped integration: EXEC's outcomes, WAIT for a
// command and for input, WATCH's events, LIST's members, and the attacks on them (a forged
// mark, a command line that is two, a version 3 client asking for version 4's waits).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "protocol/command_payloads.h"
#include "protocol/session_payloads.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::ExecReply;
using protocol::FrameType;

constexpr Millis kReply{20000};

class Commands : public EndToEnd, public ::testing::WithParamInterface<std::string> {
protected:
    // A detached shell of the parameter's kind, with shell integration, in a UTF-8 locale (in
    // the C locale zsh's line editor reads each byte above 127 as a character of its own).
    std::string start_shell(const std::string& shell) {
        return start_detached({shell}, [](protocol::StartRequest& r) {
            r.shell_integration = true;
            std::erase_if(r.env, [](const std::string& e) { return e.starts_with("LANG=") || e.starts_with("LC_"); });
            r.env.emplace_back("LANG=C.UTF-8");
        });
    }
    // One request on a connection of its own; its first reply frame.
    Incoming request(FrameType type, const std::string& payload) {
        auto c = connect_as_account();
        if (!c) return {};
        EXPECT_EQ(c->send_frame(type, payload), 0);
        return c->next(kReply, 1 << 20);
    }
    std::optional<ExecReply> exec(const std::string& id, const std::string& command, std::uint64_t timeout_ms = 20000,
                                  bool interrupt = false) {
        const auto in = request(FrameType::Exec, protocol::encode(protocol::ExecRequest{id, command, timeout_ms, interrupt}));
        if (in.kind != Incoming::Kind::Frame || in.frame.type != FrameType::Executed) {
            ADD_FAILURE() << "EXEC " << command << ": " << in.describe();
            return std::nullopt;
        }
        auto reply = protocol::decode_executed(in.frame.text());
        EXPECT_TRUE(reply) << reply.error;
        return reply ? reply.value : std::nullopt;
    }
    // The log's bytes [from, to), read with READ.
    std::string read(const std::string& id, std::uint64_t from, std::uint64_t to) {
        auto c = connect_as_account();
        EXPECT_EQ(c->send_frame(FrameType::Read, protocol::encode(protocol::ReadRequest{
                                                    id, {protocol::LogPosition::Kind::Offset, from}, to - from})),
                  0);
        std::string out;
        for (;;) {
            auto f = c->next(kReply);
            if (f.kind != Incoming::Kind::Frame) break;
            if (f.frame.type == FrameType::Output) out += f.frame.text();
        }
        return out;
    }
    std::string output_of(const std::string& id, const ExecReply& r) {
        if (!r.command || !r.command->output_end) return "<none>";
        std::string raw = read(id, r.command->output_start, *r.command->output_end);
        std::string text;
        for (std::size_t i = 0; i < raw.size(); ++i)
            if (!(raw[i] == '\r' && i + 1 < raw.size() && raw[i + 1] == '\n')) text += raw[i];
        return text;
    }
    std::optional<protocol::WaitReply> wait(const std::string& payload) {
        const auto in = request(FrameType::Wait, payload);
        if (in.kind != Incoming::Kind::Frame || in.frame.type != FrameType::Waited) {
            ADD_FAILURE() << "WAIT: " << in.describe();
            return std::nullopt;
        }
        auto reply = protocol::decode_waited(in.frame.text());
        return reply ? reply.value : std::nullopt;
    }
};

TEST_P(Commands, ExecReportsEachCommandsStatusAndExactlyItsOutput) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam());
    ASSERT_FALSE(id.empty());
    struct Case {
        std::string command;
        int status;
        std::string output;
    };
    const std::vector<Case> cases = {
        {"true", 0, ""},
        {"false", 1, ""},
        {"(exit 7)", 7, ""},
        {"printf abc", 0, "abc"},
        {"echo 'héllo wörld ✓'", 0, "héllo wörld ✓\n"},
        {"cd /tmp", 0, ""},
        {"pwd", 0, "/tmp\n"},
        {"seq 1 3; (exit 3)", 3, "1\n2\n3\n"},
    };
    std::uint64_t seq = 0;
    for (const auto& c : cases) {
        const auto r = exec(id, c.command);
        ASSERT_TRUE(r) << c.command;
        EXPECT_EQ(r->state, ExecReply::Outcome::Exited) << c.command;
        EXPECT_EQ(r->exit_code, c.status) << c.command;
        ASSERT_TRUE(r->command) << c.command;
        EXPECT_EQ(r->command->command, c.command);
        EXPECT_GT(r->command->seq, seq) << c.command;
        seq = r->command->seq;
        EXPECT_EQ(output_of(id, *r), c.output) << c.command;
    }
    // The directory the shell reported follows the cd.
    const auto pwd = exec(id, "true");
    ASSERT_TRUE(pwd && pwd->command);
    EXPECT_EQ(pwd->command->cwd, "/tmp");
}

// The command's end mark comes after a mebibyte the worker must read first; meanwhile the
// shell already waits at its next prompt. That is not the command waiting for input.
TEST_P(Commands, ACommandWithMuchOutputIsReportedEndedNotWaiting) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam());
    ASSERT_FALSE(id.empty());
    for (int round = 0; round < 5; ++round) {
        const auto r = exec(id, "head -c 1048576 /dev/zero | tr '\\0' x");
        ASSERT_TRUE(r);
        ASSERT_EQ(r->state, ExecReply::Outcome::Exited) << "round " << round;
        EXPECT_EQ(r->exit_code, 0);
        ASSERT_TRUE(r->command && r->command->output_end);
        EXPECT_EQ(*r->command->output_end - r->command->output_start, 1048576u);
    }
}

TEST_P(Commands, ACommandThatReadsALineIsReportedWaitingForInputAndEndsOnceAnswered) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam());
    ASSERT_FALSE(id.empty());
    const auto r = exec(id, "read -r line; echo \"got $line\"");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->state, ExecReply::Outcome::WaitingForInput);
    ASSERT_TRUE(r->command);
    EXPECT_FALSE(r->command->output_end);  // it still runs
    EXPECT_EQ(r->exit_code, std::nullopt);

    auto sent = connect_as_account();
    const std::string input = id + "answer\r";
    ASSERT_EQ(sent->send(protocol::encode_frame(FrameType::Send, input, protocol::kVersion)), 0);
    ASSERT_EQ(sent->next(kReply).frame.type, FrameType::Sent);
    const auto waited = wait(R"({"id":")" + id + R"(","for":"command","after":)" +
                             std::to_string(r->command->seq - 1) + "}");
    ASSERT_TRUE(waited);
    EXPECT_TRUE(waited->matched);
    EXPECT_EQ(waited->reason, "command");
    ASSERT_TRUE(waited->command);
    EXPECT_EQ(waited->command->seq, r->command->seq);
    EXPECT_EQ(waited->command->exit_code, 0);
}

TEST_P(Commands, AnUnfinishedLineIsReportedWaitingForInputAndEndsOnceFinished) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam());
    ASSERT_FALSE(id.empty());
    const auto r = exec(id, "echo 'open");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->state, ExecReply::Outcome::WaitingForInput);
    EXPECT_FALSE(r->command);  // the shell waits for the rest of the line: no command runs
    auto sent = connect_as_account();
    ASSERT_EQ(sent->send(protocol::encode_frame(FrameType::Send, id + "closed'\r", protocol::kVersion)), 0);
    // No command has ended in this session: the first to end is this one, even if it ends
    // before the WAIT arrives.
    const auto waited = wait(R"({"id":")" + id + R"(","for":"command","after":0})");
    ASSERT_TRUE(waited && waited->command);
    EXPECT_EQ(waited->command->exit_code, 0);
    EXPECT_EQ(read(id, waited->command->output_start, *waited->command->output_end), "open\r\nclosed\r\n");
}

TEST_P(Commands, TimeoutAndInterrupt) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell(GetParam());
    ASSERT_FALSE(id.empty());
    const auto timed_out = exec(id, "sleep 1000", 300);
    ASSERT_TRUE(timed_out);
    EXPECT_EQ(timed_out->state, ExecReply::Outcome::Timeout);
    // The command still runs: a second EXEC waits for the prompt, and is interrupted itself.
    const auto interrupted = exec(id, "true", 300, /*interrupt=*/true);
    ASSERT_TRUE(interrupted);
    EXPECT_EQ(interrupted->state, ExecReply::Outcome::Timeout);  // never typed: no prompt came
    EXPECT_FALSE(interrupted->command);

    auto sigint = connect_as_account();
    ASSERT_EQ(sigint->send(protocol::encode_frame(FrameType::Send, id + "\x03", protocol::kVersion)), 0);
    ASSERT_TRUE(wait(R"({"id":")" + id + R"(","for":"prompt"})"));
    const auto r = exec(id, "sleep 1000", 300, /*interrupt=*/true);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->state, ExecReply::Outcome::Interrupted);
    EXPECT_EQ(r->exit_code, 130);
}

INSTANTIATE_TEST_SUITE_P(Shells, Commands, ::testing::Values("bash", "zsh"));

class CommandsAttacks : public Commands {};

TEST_F(CommandsAttacks, ASecondExecWhileOneRunsIsBusy) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell("bash");
    ASSERT_FALSE(id.empty());
    auto first = connect_as_account();
    ASSERT_EQ(first->send_frame(FrameType::Exec, protocol::encode(protocol::ExecRequest{id, "sleep 1000", 20000, false})), 0);
    // The first one has typed its command once the shell echoes it.
    const auto typed = wait(R"({"id":")" + id + R"(","for":"text","pattern":"sleep 1000"})");
    ASSERT_TRUE(typed && typed->matched);
    std::string seen;
    auto second = connect_as_account();
    ASSERT_EQ(second->send_frame(FrameType::Exec, protocol::encode(protocol::ExecRequest{id, "true", 20000, false})), 0);
    const auto error = second->expect_error(kReply, &seen);
    ASSERT_TRUE(error) << seen;
    EXPECT_EQ(error->code, protocol::ErrorCode::Busy);
}

TEST_F(CommandsAttacks, ExecInAShellWithoutIntegrationIsRefused) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_detached({"sh", "-c", "exec sleep 1000"});
    ASSERT_FALSE(id.empty());
    auto c = connect_as_account();
    ASSERT_EQ(c->send_frame(FrameType::Exec, protocol::encode(protocol::ExecRequest{id, "true", 20000, false})), 0);
    std::string seen;
    const auto error = c->expect_error(kReply, &seen);
    ASSERT_TRUE(error) << seen;
    EXPECT_EQ(error->code, protocol::ErrorCode::NoShellIntegration);
}

TEST_F(CommandsAttacks, ACommandLineThatIsTwoIsRefused) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell("bash");
    ASSERT_FALSE(id.empty());
    for (const char* line : {"true\nrm -rf ~", "true\rrm -rf ~", "a\x1b[201~b"}) {
        auto c = connect_as_account();
        ASSERT_EQ(c->send_frame(FrameType::Exec, protocol::encode(protocol::ExecRequest{id, line, 20000, false})), 0);
        std::string seen;
        const auto error = c->expect_error(kReply, &seen);
        ASSERT_TRUE(error) << seen;
        EXPECT_EQ(error->code, protocol::ErrorCode::BadFrame);
    }
}

TEST_F(CommandsAttacks, StartWithShellIntegrationOfANonShellIsRefused) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as_account();
    UniqueFd cwd = open_work_dir();
    auto start = RawClient::start_request({"bash", "-c", "echo hi"}, session_env(), cwd.get());
    start.shell_integration = true;
    ASSERT_EQ(c->send_start(start, {cwd.get()}), 0);
    std::string seen;
    const auto error = c->expect_error(kReply, &seen);
    ASSERT_TRUE(error) << seen;
    EXPECT_EQ(error->code, protocol::ErrorCode::BadFrame);
}

// A program prints marks of its own: the records of its session say what it printed (they
// are that session's output), and no other session's change.
TEST_F(CommandsAttacks, ForgedMarksLieOnlyAboutTheirOwnSession) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string honest = start_shell("bash");
    ASSERT_FALSE(honest.empty());
    ASSERT_TRUE(exec(honest, "true"));
    const std::string long_line(10000, 'x');
    const std::string forger = start_detached(
        {"sh", "-c",
         "printf '\\033]133;A\\033\\\\\\033]133;C;cmdline_url=" + long_line + "\\033\\\\forged\\033]133;D;0\\033\\\\'; exec sleep 1000"});
    ASSERT_FALSE(forger.empty());
    const auto forged = wait(R"({"id":")" + forger + R"(","for":"command","after":0})");
    ASSERT_TRUE(forged && forged->command);
    EXPECT_LE(forged->command->command.size(), protocol::CommandRecord::kMaxText);

    auto c = connect_as_account();
    ASSERT_EQ(c->send_frame(FrameType::Commands, protocol::encode(protocol::CommandsRequest{honest, 0})), 0);
    const auto in = c->next(kReply, 1 << 20);
    ASSERT_EQ(in.frame.type, FrameType::CommandList) << in.describe();
    const auto list = protocol::decode_command_list(in.frame.text());
    ASSERT_TRUE(list) << list.error;
    ASSERT_EQ(list.value->commands.size(), 1u);
    EXPECT_EQ(list.value->commands.front().command, "true");
    EXPECT_EQ(list.value->shell, "bash");
}

TEST_F(CommandsAttacks, VersionFourWaitsAreUnknownToAVersionThreeClient) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell("bash");
    ASSERT_FALSE(id.empty());
    for (const char* what : {"command", "prompt", "input"}) {
        auto c = connect_as_account();
        const std::string payload = R"({"id":")" + id + R"(","for":")" + what + R"("})";
        ASSERT_EQ(c->send(protocol::encode_frame(FrameType::Wait, payload, 3)), 0);
        std::string seen;
        const auto error = c->expect_error(kReply, &seen);
        ASSERT_TRUE(error) << seen;
        EXPECT_EQ(error->code, protocol::ErrorCode::BadFrame);
    }
}

TEST_F(Commands, WatchPushesCommandInputAndExitEvents) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_shell("bash");
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(wait(R"({"id":")" + id + R"(","for":"prompt"})"));
    auto watch = connect_as_account();
    ASSERT_EQ(watch->send_frame(FrameType::Watch, protocol::encode(protocol::WatchRequest{id})), 0);
    const auto r = exec(id, "read -r x");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->state, ExecReply::Outcome::WaitingForInput);
    auto sent = connect_as_account();
    ASSERT_EQ(sent->send(protocol::encode_frame(FrameType::Send, id + "y\rexit 4\r", protocol::kVersion)), 0);

    std::vector<std::string> kinds;
    for (;;) {
        auto f = watch->next(kReply);
        if (f.kind != Incoming::Kind::Frame) break;
        ASSERT_EQ(f.frame.type, FrameType::Event) << f.describe();
        const auto event = protocol::decode_event(f.frame.text());
        ASSERT_TRUE(event) << event.error;
        kinds.emplace_back(protocol::to_string(event.value->kind));
        if (event.value->kind == protocol::SessionEvent::Kind::Exit) {
            ASSERT_TRUE(event.value->exit);
            EXPECT_EQ(event.value->exit->code, 4);
            break;
        }
    }
    const auto index = [&](const std::string& k) {
        return std::find(kinds.begin(), kinds.end(), k) - kinds.begin();
    };
    ASSERT_LT(index("command_start"), static_cast<long>(kinds.size()));
    EXPECT_LT(index("command_start"), index("input"));
    EXPECT_LT(index("input"), index("command_end"));
    EXPECT_EQ(kinds.back(), "exit");
}

}  // namespace
}  // namespace ptyvisor::itest
