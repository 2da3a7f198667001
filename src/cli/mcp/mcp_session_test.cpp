#include "cli/mcp/mcp_session.h"

#include <gtest/gtest.h>

#include <vector>

namespace ptyvisor::cli::mcp {
namespace {

using nlohmann::json;

const std::string kId = "0123456789abcdef0123456789abcdef";

// Records the calls it is given; the test completes them.
class FakeRunner : public ToolRunner {
  public:
    void start(std::uint64_t call, const ToolArgs& args) override { started.emplace_back(call, args); }
    void cancel(std::uint64_t call) override { cancelled.push_back(call); }
    std::vector<std::pair<std::uint64_t, ToolArgs>> started;
    std::vector<std::uint64_t> cancelled;
};

class McpSessionTest : public ::testing::Test {
  protected:
    McpSessionTest()
        : session(
              runner, [this](std::string line) { sent.push_back(json::parse(line)); }, "9.9") {}

    // Feeds `message` as one line; returns the replies it caused.
    std::vector<json> feed(const json& message) { return feed_line(message.dump()); }
    std::vector<json> feed_line(std::string_view line) {
        sent.clear();
        session.handle_line(line);
        return sent;
    }
    json request(int id, const std::string& method, json params = json::object()) {
        return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
    }
    json only_reply(const json& message) {
        const auto replies = feed(message);
        EXPECT_EQ(replies.size(), 1u) << message.dump();
        return replies.empty() ? json() : replies.front();
    }
    void initialize() {
        only_reply(request(1, "initialize", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()}}));
        EXPECT_TRUE(feed({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}).empty());
    }
    json call(int id, const std::string& tool, json arguments) {
        return request(id, "tools/call", {{"name", tool}, {"arguments", std::move(arguments)}});
    }

    FakeRunner runner;
    std::vector<json> sent;
    McpSession session;
};

TEST_F(McpSessionTest, InitializeAnswersTheClientsVersionWhenSupported) {
    for (const char* v : {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}) {
        const json r = only_reply(request(1, "initialize", {{"protocolVersion", v}}));
        EXPECT_EQ(r.at("id"), 1);
        EXPECT_EQ(r.at("result").at("protocolVersion"), v);
        EXPECT_TRUE(r.at("result").at("capabilities").contains("tools"));
        EXPECT_EQ(r.at("result").at("serverInfo").at("name"), "ptyvisor");
        EXPECT_EQ(r.at("result").at("serverInfo").at("version"), "9.9");
    }
}

TEST_F(McpSessionTest, InitializeAnswersOurNewestForAnUnknownVersion) {
    const json r = only_reply(request(1, "initialize", {{"protocolVersion", "1999-01-01"}}));
    EXPECT_EQ(r.at("result").at("protocolVersion"), kProtocolVersions[0]);
    const json bad = only_reply(request(2, "initialize", json::object()));
    EXPECT_EQ(bad.at("error").at("code"), -32602);
}

TEST_F(McpSessionTest, OnlyPingBeforeInitialize) {
    EXPECT_EQ(only_reply(request(1, "ping")).at("result"), json::object());
    const json r = only_reply(request(2, "tools/list"));
    EXPECT_EQ(r.at("error").at("code"), -32600);
    EXPECT_EQ(r.at("id"), 2);
}

TEST_F(McpSessionTest, ToolsListListsEveryTool) {
    initialize();
    const json r = only_reply(request(2, "tools/list"));
    EXPECT_EQ(r.at("result").at("tools").size(), 9u);
}

TEST_F(McpSessionTest, ProtocolErrors) {
    initialize();
    const json parse = feed_line("{not json").at(0);
    EXPECT_EQ(parse.at("error").at("code"), -32700);
    EXPECT_TRUE(parse.at("id").is_null());
    EXPECT_EQ(only_reply(request(3, "resources/list")).at("error").at("code"), -32601);
    EXPECT_EQ(only_reply(json::array({request(4, "ping")})).at("error").at("code"), -32600);
    EXPECT_EQ(only_reply({{"jsonrpc", "1.0"}, {"id", 5}, {"method", "ping"}}).at("error").at("code"), -32600);
    EXPECT_EQ(only_reply(request(6, "tools/call", {{"name", "terminal_explode"}})).at("error").at("code"), -32602);
    EXPECT_EQ(only_reply(request(7, "tools/call", {{"arguments", json::object()}})).at("error").at("code"), -32602);
    EXPECT_EQ(only_reply(call(8, "terminal_list", json::array())).at("error").at("code"), -32602);
    EXPECT_TRUE(runner.started.empty());
}

TEST_F(McpSessionTest, NotificationsAreNeverAnswered) {
    initialize();
    EXPECT_TRUE(feed({{"jsonrpc", "2.0"}, {"method", "notifications/whatever"}}).empty());
    EXPECT_TRUE(
        feed({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 99}}}}).empty());
    EXPECT_TRUE(feed_line("").empty());
}

TEST_F(McpSessionTest, BadArgumentsAreAToolErrorWithTheReason) {
    initialize();
    const json r = only_reply(call(2, "terminal_read", {{"id", kId}, {"max_bytes", "lots"}}));
    EXPECT_EQ(r.at("result").at("isError"), true);
    EXPECT_EQ(r.at("result").at("content").at(0).at("text"),
              "Invalid arguments for terminal_read: 'max_bytes' must be an integer from 1 to 65536");
    EXPECT_TRUE(runner.started.empty());
}

TEST_F(McpSessionTest, AToolCallIsAnsweredWhenTheRunnerCompletesIt) {
    initialize();
    EXPECT_TRUE(feed(request(2, "tools/call", {{"name", "terminal_list"}})).empty());  // arguments may be left out
    ASSERT_EQ(runner.started.size(), 1u);
    EXPECT_TRUE(std::holds_alternative<ListArgs>(runner.started[0].second));
    EXPECT_EQ(session.calls_in_flight(), 1u);
    sent.clear();
    const json structured = {{"sessions", json::array()}};
    session.complete(runner.started[0].first, ToolResult::ok(structured));
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].at("id"), 2);
    EXPECT_EQ(sent[0].at("result").at("structuredContent"), structured);
    EXPECT_EQ(json::parse(sent[0].at("result").at("content").at(0).at("text").get<std::string>()), structured);
    EXPECT_EQ(sent[0].at("result").at("isError"), false);
    EXPECT_EQ(session.calls_in_flight(), 0u);
}

TEST_F(McpSessionTest, ACancelledCallIsNotAnswered) {
    initialize();
    feed({{"jsonrpc", "2.0"},
          {"id", "abc"},
          {"method", "tools/call"},
          {"params", {{"name", "terminal_wait"}, {"arguments", {{"id", kId}}}}}});
    ASSERT_EQ(runner.started.size(), 1u);
    EXPECT_TRUE(
        feed({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", "abc"}}}}).empty());
    EXPECT_EQ(runner.cancelled, (std::vector<std::uint64_t>{runner.started[0].first}));
    sent.clear();
    session.complete(runner.started[0].first, ToolResult::error("too late"));
    EXPECT_TRUE(sent.empty());
}

TEST_F(McpSessionTest, ErrorsFromTheRunnerAreToolErrors) {
    initialize();
    feed(call(2, "terminal_kill", {{"id", kId}}));
    ASSERT_EQ(runner.started.size(), 1u);
    sent.clear();
    session.complete(runner.started[0].first, ToolResult::error("cannot reach ptyvisord: no socket"));
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].at("result").at("isError"), true);
    EXPECT_FALSE(sent[0].at("result").contains("structuredContent"));
}

TEST_F(McpSessionTest, ALineTooLongIsAParseError) {
    sent.clear();
    session.line_too_long();
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].at("error").at("code"), -32700);
}

}  // namespace
}  // namespace ptyvisor::cli::mcp
