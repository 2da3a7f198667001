#include "cli/exec_command.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/relay.h"
#include "cli/session_commands.h"

namespace ptyvisor::cli {
namespace {

using Outcome = protocol::ExecReply::Outcome;

protocol::CommandRecord record(std::uint64_t seq, std::optional<int> exit_code) {
    protocol::CommandRecord r;
    r.seq = seq;
    r.command = "make test";
    r.cwd = "/home/me/project";
    r.output_start = 100;
    r.started_ms = 1'000'000;
    if (exit_code) {
        r.output_end = 200;
        r.exit_code = exit_code;
        r.ended_ms = 1'002'500;
    }
    return r;
}

protocol::ExecReply reply(Outcome state, std::optional<int> exit_code, std::optional<protocol::CommandRecord> r) {
    protocol::ExecReply v;
    v.id = std::string(32, 'a');
    v.state = state;
    v.exit_code = exit_code;
    v.command = std::move(r);
    return v;
}

TEST(ExecStatus, ExitedIsTheCommandsStatus) {
    std::string message;
    EXPECT_EQ(exec_status(reply(Outcome::Exited, 7, record(3, 7)), message), 7);
    EXPECT_EQ(message, "");
    EXPECT_EQ(exec_status(reply(Outcome::Interrupted, 130, record(3, 130)), message), 130);
}

TEST(ExecStatus, TimeoutAndInputHaveTheirOwnStatusAndSayHowToGoOn) {
    std::string message;
    EXPECT_EQ(exec_status(reply(Outcome::Timeout, std::nullopt, record(4, std::nullopt)), message), kTimedOut);
    EXPECT_NE(message.find("--after 3"), std::string::npos) << message;
    EXPECT_EQ(exec_status(reply(Outcome::WaitingForInput, std::nullopt, record(4, std::nullopt)), message),
              kWaitingForInput);
    EXPECT_NE(message.find("ptyvisor send " + std::string(32, 'a')), std::string::npos) << message;
    EXPECT_NE(message.find("wait --for command --after 3"), std::string::npos) << message;
}

TEST(ExecStatus, SessionEndedAndAMissingStatusAreFailures) {
    std::string message;
    EXPECT_EQ(exec_status(reply(Outcome::SessionEnded, std::nullopt, std::nullopt), message), kFailure);
    EXPECT_FALSE(message.empty());
    EXPECT_EQ(exec_status(reply(Outcome::Exited, std::nullopt, record(1, std::nullopt)), message), kFailure);
}

TEST(ExecJson, MapsTheProtocolsStatesOntoTheContract) {
    auto j = nlohmann::json::parse(exec_json(reply(Outcome::Exited, 0, record(2, 0)), "hi\r\n", false));
    EXPECT_EQ(j, nlohmann::json::parse(R"({"exit_code":0,"state":"exited","output":"hi\r\n","truncated":false,"seq":2})"));
    j = nlohmann::json::parse(exec_json(reply(Outcome::Interrupted, 130, record(2, 130)), "", false));
    EXPECT_EQ(j["state"], "exited");
    EXPECT_EQ(j["interrupted"], true);
    EXPECT_EQ(j["exit_code"], 130);
    j = nlohmann::json::parse(exec_json(reply(Outcome::SessionEnded, std::nullopt, std::nullopt), "", true));
    EXPECT_EQ(j["state"], "exited");
    EXPECT_EQ(j["session_ended"], true);
    EXPECT_TRUE(j["exit_code"].is_null());
    EXPECT_TRUE(j["seq"].is_null());
    EXPECT_EQ(j["truncated"], true);
    j = nlohmann::json::parse(exec_json(reply(Outcome::WaitingForInput, std::nullopt, record(5, std::nullopt)), "", false));
    EXPECT_EQ(j["state"], "waiting_for_input");
    EXPECT_EQ(j["seq"], 5);
}

TEST(ExecJson, InvalidUtf8BecomesTheReplacementCharacter) {
    const auto j = nlohmann::json::parse(exec_json(reply(Outcome::Exited, 0, record(1, 0)), "a\xff" "b", false));
    EXPECT_EQ(j["output"], "a\xEF\xBF\xBD" "b");
}

TEST(FormatCommands, ListsEndedThenRunning) {
    protocol::CommandListReply list;
    list.commands = {record(1, 0), record(2, 1)};
    list.current = record(3, std::nullopt);
    const std::string table = format_commands(list);
    EXPECT_EQ(table.substr(0, table.find('\n')).find("SEQ"), 0u) << table;
    EXPECT_NE(table.find("2.5s"), std::string::npos) << table;
    EXPECT_NE(table.find("running"), std::string::npos) << table;
    EXPECT_LT(table.find("\n1 "), table.find("\n3 ")) << table;
}

TEST(FormatDuration, Units) {
    EXPECT_EQ(format_duration(850), "850ms");
    EXPECT_EQ(format_duration(12'345), "12.3s");
    EXPECT_EQ(format_duration(245'000), "4m05s");
    EXPECT_EQ(format_duration(7'380'000), "2h03m");
}

}  // namespace
}  // namespace ptyvisor::cli
