#include "cli/session_commands.h"

#include <signal.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace ptyvisor::cli {
namespace {

protocol::SessionInfo session(std::string id, std::vector<std::string> argv) {
    protocol::SessionInfo s;
    s.id = std::move(id);
    s.unit = "ptyvisor-" + s.id + ".service";
    s.argv = std::move(argv);
    s.cwd = "/home/agent/src";
    s.pid = 4242;
    s.created = 1000;
    return s;
}

std::vector<protocol::SessionInfo> examples() {
    auto running = session(std::string(32, 'a'), {"npm", "run", "dev"});
    running.state = protocol::State::Starting;
    running.offset = 1234;
    running.clients = 1;
    running.detached = true;
    auto exited = session(std::string(32, 'b'), {"sh", "-c", "echo 'hi there'; exit 3"});
    exited.state = protocol::State::Exited;
    exited.exit = protocol::ExitStatus{};
    exited.exit->kind = protocol::ExitStatus::Kind::Exited;
    exited.exit->code = 3;
    auto killed = session(std::string(32, 'c'), {"sleep", "60"});
    killed.state = protocol::State::Exited;
    killed.exit = protocol::ExitStatus{};
    killed.exit->kind = protocol::ExitStatus::Kind::Signaled;
    killed.exit->signal = SIGKILL;
    killed.exit->core_dumped = true;
    killed.exit->reason = protocol::ExitReason::Stopped;
    killed.exit->unit_result = "signal";
    return {running, exited, killed};
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

TEST(FormatAge, SecondsMinutesHoursDays) {
    EXPECT_EQ(format_age(0), "0s");
    EXPECT_EQ(format_age(59), "59s");
    EXPECT_EQ(format_age(60), "1m");
    EXPECT_EQ(format_age(3599), "59m");
    EXPECT_EQ(format_age(3600), "1h");
    EXPECT_EQ(format_age(86399), "23h");
    EXPECT_EQ(format_age(86400 * 3), "3d");
    EXPECT_EQ(format_age(-5), "0s") << "a clock that went back";
}

TEST(FormatSessions, AHeaderAndOneAlignedLinePerSession) {
    const auto lines = lines_of(format_sessions(examples(), 1000 + 125));
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_EQ(lines[0].substr(0, 2), "ID");
    for (const char* column : {"STATE", "EXIT", "CLIENTS", "OFFSET", "AGE", "COMMAND"})
        EXPECT_NE(lines[0].find(column), std::string::npos) << column;
    // Columns line up: each field starts where its header does.
    const auto state_at = lines[0].find("STATE");
    const auto command_at = lines[0].find("COMMAND");
    EXPECT_EQ(lines[1].substr(0, 32), std::string(32, 'a'));
    EXPECT_EQ(lines[1].substr(state_at, 7), "running") << "starting is running to a person";
    EXPECT_EQ(lines[1].substr(command_at), "npm run dev");
    EXPECT_NE(lines[1].find(" - "), std::string::npos) << "no exit status while running";
    EXPECT_NE(lines[1].find(" 1234 "), std::string::npos);
    EXPECT_NE(lines[1].find(" 2m "), std::string::npos);
    EXPECT_EQ(lines[2].substr(state_at, 6), "exited");
    EXPECT_EQ(lines[2].substr(command_at), "sh -c 'echo '\\''hi there'\\''; exit 3'") << "quoted as a shell takes it";
    EXPECT_NE(lines[2].find(" 3 "), std::string::npos);
    EXPECT_NE(lines[3].find("SIGKILL (core)"), std::string::npos);
}

TEST(FormatSessions, NoSessionsIsTheHeaderAlone) {
    const auto lines = lines_of(format_sessions({}, 0));
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0].substr(0, 2), "ID");
}

TEST(FormatSessions, AProgramWaitingForInputShowsInState) {
    auto sessions = examples();
    sessions[0].waiting_for_input = true;
    auto lines = lines_of(format_sessions(sessions, 1000));
    const auto state_at = lines[0].find("STATE");
    EXPECT_EQ(lines[1].substr(state_at, 6), "input ");
    sessions[0].at_prompt = true;  // a shell at its prompt waits too: that is no news
    lines = lines_of(format_sessions(sessions, 1000));
    EXPECT_EQ(lines[1].substr(state_at, 7), "running");
}

TEST(SessionsJson, CommandMembers) {
    auto sessions = examples();
    sessions[0].shell = "zsh";
    sessions[0].waiting_for_input = true;
    protocol::CommandRecord r;
    r.seq = 4;
    r.command = "make";
    sessions[0].last_command = r;
    sessions[1].last_command = r;
    sessions[1].last_command->output_end = 10;
    sessions[1].last_command->exit_code = 2;
    const auto j = nlohmann::json::parse(sessions_json(sessions));
    EXPECT_EQ(j[0]["shell"], "zsh");
    EXPECT_EQ(j[0]["waiting_for_input"], true);
    EXPECT_EQ(j[0]["last_command"], nlohmann::json::parse(R"({"seq":4,"command":"make","exit_code":null,"running":true})"));
    EXPECT_EQ(j[1]["last_command"], nlohmann::json::parse(R"({"seq":4,"command":"make","exit_code":2,"running":false})"));
    EXPECT_EQ(j[2]["waiting_for_input"], false);
    EXPECT_TRUE(j[2]["last_command"].is_null());
    EXPECT_TRUE(j[2]["shell"].is_null());
}

TEST(SessionsJson, TheMembersScriptsRelyOn) {
    const auto j = nlohmann::json::parse(sessions_json(examples()));
    ASSERT_TRUE(j.is_array());
    ASSERT_EQ(j.size(), 3u);
    const auto& running = j[0];
    EXPECT_EQ(running["id"], std::string(32, 'a'));
    EXPECT_EQ(running["argv"], (std::vector<std::string>{"npm", "run", "dev"}));
    EXPECT_EQ(running["state"], "running");
    EXPECT_TRUE(running["exit"].is_null());
    EXPECT_EQ(running["offset"], 1234);
    EXPECT_EQ(running["clients"], 1);
    EXPECT_EQ(running["created"], 1000);
    EXPECT_EQ(running["cwd"], "/home/agent/src");
    EXPECT_EQ(running["detached"], true);
    EXPECT_EQ(running["pid"], 4242);

    EXPECT_EQ(j[1]["state"], "exited");
    EXPECT_EQ(j[1]["exit"]["code"], 3);
    EXPECT_EQ(j[1]["exit"]["status"], "exited");
    EXPECT_FALSE(j[1]["exit"].contains("signal"));
    EXPECT_EQ(j[1]["detached"], false);

    EXPECT_EQ(j[2]["exit"]["signal"], SIGKILL);
    EXPECT_EQ(j[2]["exit"]["core"], true);
    EXPECT_EQ(j[2]["exit"]["reason"], "stopped");
    EXPECT_EQ(j[2]["exit"]["unit_result"], "signal");
    EXPECT_FALSE(j[2]["exit"].contains("code"));
}

TEST(SessionsJson, NoSessionsIsAnEmptyArray) {
    EXPECT_EQ(nlohmann::json::parse(sessions_json({})), nlohmann::json::array());
}

TEST(SendPayload, TextIsJoinedBySpacesAndKeysAreNot) {
    EXPECT_EQ(send_payload(false, {"echo", "hi", "Enter"}), "echo hi Enter");
    EXPECT_EQ(send_payload(false, {"C-c"}), "C-c") << "without --keys, names are text";
    EXPECT_EQ(send_payload(true, {"echo hi", "Enter"}), "echo hi\r");
    EXPECT_EQ(send_payload(true, {"C-c"}), "\x03");
}

protocol::WaitReply waited(std::string reason, std::optional<protocol::ExitStatus> exit = std::nullopt) {
    protocol::WaitReply r;
    r.reason = std::move(reason);
    r.matched = r.reason != "timeout" && r.reason != "exited";
    r.exit = std::move(exit);
    return r;
}

protocol::ExitStatus exited_with(int code) {
    protocol::ExitStatus s;
    s.kind = protocol::ExitStatus::Kind::Exited;
    s.code = code;
    return s;
}

TEST(WaitStatus, ExitIsTheSessionsStatusTimeoutIs124) {
    using For = protocol::WaitRequest::For;
    std::string message;
    EXPECT_EQ(wait_status(waited("exit", exited_with(0)), For::Exit, message), 0);
    EXPECT_EQ(wait_status(waited("exit", exited_with(7)), For::Exit, message), 7);
    protocol::ExitStatus signaled;
    signaled.kind = protocol::ExitStatus::Kind::Signaled;
    signaled.signal = SIGTERM;
    EXPECT_EQ(wait_status(waited("exit", signaled), For::Exit, message), 128 + SIGTERM);
    EXPECT_TRUE(message.empty());
    EXPECT_EQ(wait_status(waited("timeout"), For::Exit, message), kTimedOut);
    EXPECT_EQ(wait_status(waited("timeout"), For::Text, message), kTimedOut);
    EXPECT_EQ(wait_status(waited("quiet"), For::Quiet, message), 0);
    EXPECT_EQ(wait_status(waited("text"), For::Text, message), 0);
    EXPECT_TRUE(message.empty());
}

TEST(WaitStatus, ExitingBeforeTheConditionIsOneWithAMessage) {
    using For = protocol::WaitRequest::For;
    std::string message;
    EXPECT_EQ(wait_status(waited("exited", exited_with(2)), For::Text, message), 1);
    EXPECT_NE(message.find("exited (status 2) before the text appeared"), std::string::npos) << message;
    EXPECT_EQ(wait_status(waited("exited", exited_with(0)), For::Quiet, message), 1);
    EXPECT_NE(message.find("quiet"), std::string::npos) << message;
    EXPECT_EQ(wait_status(waited("gone"), For::Exit, message), 255);
    EXPECT_FALSE(message.empty());
    EXPECT_EQ(wait_status(waited("something new"), For::Exit, message), 255);
    EXPECT_EQ(wait_status(waited("exit"), For::Exit, message), 255) << "an exit without its status";
    EXPECT_NE(message.find("did not say"), std::string::npos) << message;
}

}  // namespace
}  // namespace ptyvisor::cli
