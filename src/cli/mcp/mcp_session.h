// McpSession: the MCP lifecycle over JSON-RPC 2.0, one message per line, without I/O.
// handle_line() takes each line read from the client; replies go to the `send` callback as
// whole lines (without the newline). Tool calls go to a ToolRunner, which may answer at once
// or later (complete()), so that a long terminal_wait does not hold up a ping.
//
// Lifecycle (modelcontextprotocol.io, specification, basic/lifecycle): `initialize` first
// (anything else but `ping` before it is refused); the version answered is the client's if we
// support it, else our newest; then `notifications/initialized`, `ping`, `tools/list`,
// `tools/call`, and `notifications/cancelled`, which abandons a call in flight (no reply is
// sent for it). With a ResourceRunner (set_resources()), sessions are resources too
// (mcp_resources.cpp, session_resources.h): resources/list, resources/templates/list,
// resources/read, resources/subscribe and resources/unsubscribe, and the server sends
// notifications/resources/updated for a subscribed session.
//
// Errors: a line that is not JSON is -32700; not a JSON-RPC request, -32600; an unknown method,
// -32601; bad params (no tool name, an unknown tool, arguments that are not an object), -32602.
// Arguments that do not fit the tool's schema are a tool result with isError, so that the
// model sees the reason and can correct the call. Nothing a client sends throws out of here.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cli/mcp/resource_runner.h"
#include "cli/mcp/tools.h"

namespace ptyvisor::cli::mcp {

// The protocol versions we speak, newest first.
inline constexpr std::string_view kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

// The longest line taken from the client; a longer one is refused (-32700) and skipped.
inline constexpr std::size_t kMaxLineBytes = 4 * 1024 * 1024;
// Tool calls in flight at once; one more is refused (a tool error) until one finishes.
inline constexpr std::size_t kMaxCallsInFlight = 32;

// A tool's result: structured content, sent also as its JSON text unless the tool has a
// text that reads better (terminal_screen's rows), or an error message.
struct ToolResult {
    bool is_error = false;
    nlohmann::json structured;  // when !is_error: an object
    std::string message;        // when is_error: the text; otherwise, if not empty, the text

    static ToolResult ok(nlohmann::json structured) { return {false, std::move(structured), {}}; }
    // Structured content with its own text rendering instead of the JSON.
    static ToolResult ok(nlohmann::json structured, std::string text) {
        return {false, std::move(structured), std::move(text)};
    }
    static ToolResult error(std::string message) { return {true, nullptr, std::move(message)}; }
};

// The tools/call result object for `r`.
nlohmann::json tool_result_json(const ToolResult& r);

// Runs tool calls. `call` is a key unique among calls in flight; the runner answers each
// exactly once with McpSession::complete(call, ...), unless McpSession::cancel() reaches it
// first (then it drops the call and does not answer).
class ToolRunner {
  public:
    virtual ~ToolRunner() = default;
    virtual void start(std::uint64_t call, const ToolArgs& args) = 0;
    virtual void cancel(std::uint64_t call) = 0;
};

class McpSession {
  public:
    using Send = std::function<void(std::string line)>;

    McpSession(ToolRunner& runner, Send send, std::string server_version);

    // One line from the client (without its newline; a trailing "\r" is allowed).
    void handle_line(std::string_view line);
    // A line longer than kMaxLineBytes was skipped.
    void line_too_long();

    // The result of tool call `call`; ignored if it was cancelled.
    void complete(std::uint64_t call, const ToolResult& result);

    // Serves resources/* with `resources` (outliving the session) and declares the capability.
    void set_resources(ResourceRunner& resources) { resources_ = &resources; }
    // The answer to resources request `call`; ignored if it was cancelled.
    void complete_resource(std::uint64_t call, const ResourceReply& reply);
    // notifications/resources/updated for `uri`; `event` (the daemon's EVENT kind) goes in _meta.
    void resource_updated(const std::string& uri, std::string_view event);

    [[nodiscard]] std::size_t calls_in_flight() const { return calls_.size() + resource_calls_.size(); }
    [[nodiscard]] bool initialized() const { return initialized_; }
    [[nodiscard]] const std::string& protocol_version() const { return version_; }

  private:
    void handle_message(const nlohmann::json& message);
    void handle_request(const nlohmann::json& id, const std::string& method, const nlohmann::json& params);
    void handle_notification(const std::string& method, const nlohmann::json& params);
    void initialize(const nlohmann::json& id, const nlohmann::json& params);
    void call_tool(const nlohmann::json& id, const nlohmann::json& params);
    void resource_request(const nlohmann::json& id, const std::string& method, const nlohmann::json& params);
    void reply(const nlohmann::json& id, nlohmann::json result);
    void reply_error(const nlohmann::json& id, int code, const std::string& message);

    ToolRunner& runner_;
    Send send_;
    std::string server_version_;
    std::string version_;       // negotiated, once initialize was answered
    bool initialized_ = false;  // initialize answered
    std::uint64_t next_call_ = 1;
    std::map<std::uint64_t, nlohmann::json> calls_;  // call -> the JSON-RPC id to answer
    ResourceRunner* resources_ = nullptr;
    std::map<std::uint64_t, nlohmann::json> resource_calls_;  // likewise, for resources/*
};

}  // namespace ptyvisor::cli::mcp
