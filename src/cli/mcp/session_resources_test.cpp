// Sessions as resources: their URIs and contents (session_resources.h), and how McpSession
// dispatches resources/* to a ResourceRunner and tells of updates (mcp_resources.cpp).
#include "cli/mcp/session_resources.h"

#include <gtest/gtest.h>

#include <vector>

#include "cli/mcp/mcp_session.h"

namespace ptyvisor::cli::mcp {
namespace {

using nlohmann::json;

const std::string kId = "0123456789abcdef0123456789abcdef";

protocol::CommandRecord record(std::uint64_t seq, std::string command) {
    protocol::CommandRecord r;
    r.seq = seq;
    r.command = std::move(command);
    r.output_start = 10 * seq;
    r.output_end = 10 * seq + 5;
    r.exit_code = 0;
    r.started_ms = 1000;
    r.ended_ms = 1001;
    return r;
}

TEST(SessionResources, UrisNameSessionsAndNothingElse) {
    EXPECT_EQ(session_uri(kId), "ptyvisor://sessions/" + kId);
    EXPECT_EQ(session_id_of(session_uri(kId)), kId);
    EXPECT_EQ(session_id_of("ptyvisor://sessions/"), std::nullopt);
    EXPECT_EQ(session_id_of("ptyvisor://sessions/" + kId + "/x"), std::nullopt);
    EXPECT_EQ(session_id_of("ptyvisor://sessions/0123456789ABCDEF0123456789ABCDEF"), std::nullopt);
    EXPECT_EQ(session_id_of("file:///etc/passwd"), std::nullopt);
}

TEST(SessionResources, ListNamesEachSession) {
    protocol::SessionInfo info;
    info.id = kId;
    info.argv = {"bash", "-i"};
    const json list = session_resource_list({info});
    ASSERT_EQ(list.at("resources").size(), 1u);
    EXPECT_EQ(list["resources"][0].at("uri"), session_uri(kId));
    EXPECT_EQ(list["resources"][0].at("title"), "bash -i");
    EXPECT_EQ(list["resources"][0].at("mimeType"), "application/json");
}

TEST(SessionResources, ContentsShowStateAndOnlyTheNewestRecords) {
    protocol::SessionInfo info;
    info.id = kId;
    info.state = protocol::State::Exited;
    info.exit = protocol::ExitStatus{protocol::ExitStatus::Kind::Exited, 3, 0, false, "", protocol::ExitReason::Exited};
    protocol::CommandListReply commands;
    commands.at_prompt = true;
    for (std::uint64_t seq = 1; seq <= kMaxRecentCommands + 5; ++seq)
        commands.commands.push_back(record(seq, "cmd" + std::to_string(seq)));
    commands.first_seq = 1;
    const json result = session_resource_contents(info, commands);
    ASSERT_EQ(result.at("contents").size(), 1u);
    const json& content = result["contents"][0];
    EXPECT_EQ(content.at("uri"), session_uri(kId));
    const json body = json::parse(content.at("text").get<std::string>());
    EXPECT_EQ(body.at("state"), "exited");
    EXPECT_EQ(body.at("exit").at("code"), 3);
    EXPECT_EQ(body.at("at_prompt"), true);
    EXPECT_EQ(body.at("waiting_for_input"), false);
    ASSERT_EQ(body.at("recent_commands").size(), kMaxRecentCommands);
    EXPECT_EQ(body["recent_commands"].back().at("command"), "cmd" + std::to_string(kMaxRecentCommands + 5));
    EXPECT_EQ(body["recent_commands"].front().at("seq"), 6);
}

TEST(SessionResources, ContentsWithoutCommandsComeFromList) {
    protocol::SessionInfo info;
    info.id = kId;
    info.waiting_for_input = true;
    info.last_command = record(4, "read x");
    const json body = json::parse(session_resource_contents(info, std::nullopt)["contents"][0]["text"].get<std::string>());
    EXPECT_EQ(body.at("state"), "running");
    EXPECT_EQ(body.at("waiting_for_input"), true);
    EXPECT_EQ(body.at("last_command").at("command"), "read x");
    EXPECT_TRUE(body.at("recent_commands").empty());
}

TEST(SessionResources, OnlyEndsInputAndExitNotify) {
    using Kind = protocol::SessionEvent::Kind;
    EXPECT_TRUE(notifies(Kind::CommandEnd));
    EXPECT_TRUE(notifies(Kind::Input));
    EXPECT_TRUE(notifies(Kind::Exit));
    EXPECT_FALSE(notifies(Kind::CommandStart));
    EXPECT_FALSE(notifies(Kind::Prompt));
}

// ---- McpSession's resources/* ------------------------------------------------------------

class NoTools : public ToolRunner {
  public:
    void start(std::uint64_t, const ToolArgs&) override {}
    void cancel(std::uint64_t) override {}
};

class FakeResources : public ResourceRunner {
  public:
    void list(std::uint64_t call) override { calls.push_back({"list", call, ""}); }
    void read(std::uint64_t call, const std::string& id) override { calls.push_back({"read", call, id}); }
    void subscribe(std::uint64_t call, const std::string& id) override { calls.push_back({"subscribe", call, id}); }
    void unsubscribe(std::uint64_t call, const std::string& id) override { calls.push_back({"unsubscribe", call, id}); }
    void cancel(std::uint64_t call) override { cancelled.push_back(call); }
    struct Call {
        std::string what;
        std::uint64_t call;
        std::string id;
    };
    std::vector<Call> calls;
    std::vector<std::uint64_t> cancelled;
};

class McpResourcesTest : public ::testing::Test {
  protected:
    McpResourcesTest() : session(tools, [this](std::string line) { sent.push_back(json::parse(line)); }, "9.9") {}

    std::vector<json> feed(const json& message) {
        sent.clear();
        session.handle_line(message.dump());
        return sent;
    }
    static json request(int id, const std::string& method, json params = json::object()) {
        return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
    }
    json initialize() {
        const auto replies = feed(request(1, "initialize", {{"protocolVersion", "2025-06-18"}}));
        EXPECT_EQ(replies.size(), 1u);
        return replies.empty() ? json() : replies[0];
    }

    NoTools tools;
    FakeResources resources;
    std::vector<json> sent;
    McpSession session;
};

TEST_F(McpResourcesTest, WithoutARunnerThereAreNoResources) {
    const json init = initialize();
    EXPECT_FALSE(init.at("result").at("capabilities").contains("resources"));
    const auto replies = feed(request(2, "resources/list"));
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(replies[0].at("error").at("code"), -32601);
}

TEST_F(McpResourcesTest, TheCapabilityOffersSubscriptions) {
    session.set_resources(resources);
    const json caps = initialize().at("result").at("capabilities");
    EXPECT_EQ(caps.at("resources").at("subscribe"), true);
    EXPECT_EQ(caps.at("resources").at("listChanged"), false);
}

TEST_F(McpResourcesTest, RequestsGoToTheRunnerAndItsAnswersBack) {
    session.set_resources(resources);
    initialize();
    const std::string uri = session_uri(kId);
    EXPECT_TRUE(feed(request(2, "resources/list")).empty());
    EXPECT_TRUE(feed(request(3, "resources/read", {{"uri", uri}})).empty());
    EXPECT_TRUE(feed(request(4, "resources/subscribe", {{"uri", uri}})).empty());
    EXPECT_TRUE(feed(request(5, "resources/unsubscribe", {{"uri", uri}})).empty());
    ASSERT_EQ(resources.calls.size(), 4u);
    EXPECT_EQ(resources.calls[0].what, "list");
    EXPECT_EQ(resources.calls[1].what, "read");
    EXPECT_EQ(resources.calls[1].id, kId);
    EXPECT_EQ(resources.calls[2].what, "subscribe");
    EXPECT_EQ(resources.calls[3].what, "unsubscribe");
    EXPECT_EQ(session.calls_in_flight(), 4u);

    sent.clear();
    session.complete_resource(resources.calls[2].call, ResourceReply::ok(json::object()));
    session.complete_resource(resources.calls[1].call, ResourceReply::error(kResourceNotFound, "gone"));
    ASSERT_EQ(sent.size(), 2u);
    EXPECT_EQ(sent[0].at("id"), 4);
    EXPECT_EQ(sent[0].at("result"), json::object());
    EXPECT_EQ(sent[1].at("id"), 3);
    EXPECT_EQ(sent[1].at("error").at("code"), kResourceNotFound);
    EXPECT_EQ(session.calls_in_flight(), 2u);
}

TEST_F(McpResourcesTest, ABadUriIsRefusedWithoutTheRunner) {
    session.set_resources(resources);
    initialize();
    auto replies = feed(request(2, "resources/read", {{"uri", "file:///etc/passwd"}}));
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(replies[0].at("error").at("code"), kResourceNotFound);
    replies = feed(request(3, "resources/subscribe", json::object()));
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(replies[0].at("error").at("code"), -32602);
    replies = feed(request(4, "resources/delete", {{"uri", session_uri(kId)}}));
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(replies[0].at("error").at("code"), -32601);
    EXPECT_TRUE(resources.calls.empty());
}

TEST_F(McpResourcesTest, TemplatesNameTheUriScheme) {
    session.set_resources(resources);
    initialize();
    const auto replies = feed(request(2, "resources/templates/list"));
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(replies[0].at("result").at("resourceTemplates").at(0).at("uriTemplate"), "ptyvisor://sessions/{id}");
}

TEST_F(McpResourcesTest, CancelReachesTheRunnerAndSilencesTheAnswer) {
    session.set_resources(resources);
    initialize();
    feed(request(7, "resources/read", {{"uri", session_uri(kId)}}));
    ASSERT_EQ(resources.calls.size(), 1u);
    EXPECT_TRUE(feed({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 7}}}}).empty());
    EXPECT_EQ(resources.cancelled, std::vector<std::uint64_t>{resources.calls[0].call});
    sent.clear();
    session.complete_resource(resources.calls[0].call, ResourceReply::ok(json::object()));
    EXPECT_TRUE(sent.empty());
    EXPECT_EQ(session.calls_in_flight(), 0u);
}

TEST_F(McpResourcesTest, AnUpdateIsTheSpecsNotificationWithTheEventInMeta) {
    session.set_resources(resources);
    initialize();
    sent.clear();
    session.resource_updated(session_uri(kId), "command_end");
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_FALSE(sent[0].contains("id"));
    EXPECT_EQ(sent[0].at("method"), "notifications/resources/updated");
    EXPECT_EQ(sent[0].at("params").at("uri"), session_uri(kId));
    EXPECT_EQ(sent[0].at("params").at("_meta").at("event"), "command_end");
}

}  // namespace
}  // namespace ptyvisor::cli::mcp
