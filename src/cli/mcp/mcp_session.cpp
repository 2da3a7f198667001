#include "cli/mcp/mcp_session.h"

#include <exception>

namespace ptyvisor::cli::mcp {
namespace {

using nlohmann::json;

constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;

// What every reply is sent as: invalid UTF-8 (never expected here) is replaced, not thrown.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

bool is_valid_id(const json& id) { return id.is_string() || id.is_number_integer(); }

constexpr std::string_view kInstructions =
    "Terminals supervised by ptyvisor: start commands on their own pseudo-terminal "
    "(terminal_start), type into them (terminal_write), wait for output or exit "
    "(terminal_wait), read their output as text (terminal_read), and end them (terminal_kill). "
    "Sessions keep running between calls; terminal_list shows them.";

}  // namespace

json tool_result_json(const ToolResult& r) {
    if (r.is_error) return {{"content", json::array({{{"type", "text"}, {"text", r.message}}})}, {"isError", true}};
    return {
        {"content", json::array({{{"type", "text"}, {"text", r.message.empty() ? dump(r.structured) : r.message}}})},
        {"structuredContent", r.structured},
        {"isError", false}};
}

McpSession::McpSession(ToolRunner& runner, Send send, std::string server_version)
    : runner_(runner), send_(std::move(send)), server_version_(std::move(server_version)) {}

void McpSession::handle_line(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) return;  // blank lines are no messages
    json message = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (message.is_discarded()) return reply_error(nullptr, kParseError, "Parse error: the line is not JSON");
    try {
        handle_message(message);
    } catch (const std::exception& e) {
        // A bug of ours, not the client's: say so rather than die.
        const json* id = message.is_object() && message.contains("id") ? &message["id"] : nullptr;
        reply_error(id != nullptr && is_valid_id(*id) ? *id : json(nullptr), kInternalError,
                    std::string("Internal error: ") + e.what());
    }
}

void McpSession::line_too_long() {
    reply_error(nullptr, kParseError,
                "Parse error: a message longer than " + std::to_string(kMaxLineBytes) + " bytes was skipped");
}

void McpSession::handle_message(const json& message) {
    if (message.is_array()) return reply_error(nullptr, kInvalidRequest, "Invalid Request: batches are not supported");
    if (!message.is_object() || message.value("jsonrpc", json()) != "2.0")
        return reply_error(nullptr, kInvalidRequest, "Invalid Request: not a JSON-RPC 2.0 message");
    const auto method = message.find("method");
    const auto id = message.find("id");
    if (method == message.end()) {
        // A response (we send no requests, so there is nothing to match it with): ignored.
        if (message.contains("result") || message.contains("error")) return;
        return reply_error(id != message.end() && is_valid_id(*id) ? *id : json(nullptr), kInvalidRequest,
                           "Invalid Request: no method");
    }
    if (!method->is_string()) return reply_error(nullptr, kInvalidRequest, "Invalid Request: method is not a string");
    const json params = message.value("params", json::object());
    if (id == message.end()) return handle_notification(method->get<std::string>(), params);
    if (!is_valid_id(*id))
        return reply_error(nullptr, kInvalidRequest, "Invalid Request: id must be a string or an integer");
    if (!params.is_object()) return reply_error(*id, kInvalidParams, "Invalid params: params must be an object");
    handle_request(*id, method->get<std::string>(), params);
}

void McpSession::handle_request(const json& id, const std::string& method, const json& params) {
    if (method == "initialize") return initialize(id, params);
    if (method == "ping") return reply(id, json::object());
    if (!initialized_) return reply_error(id, kInvalidRequest, "Invalid Request: send initialize first");
    if (method == "tools/list") return reply(id, {{"tools", tool_definitions()}});
    if (method == "tools/call") return call_tool(id, params);
    if (method.starts_with("resources/")) return resource_request(id, method, params);
    reply_error(id, kMethodNotFound, "Method not found: " + method);
}

void McpSession::handle_notification(const std::string& method, const json& params) {
    // notifications/initialized needs no action: we send no requests of our own that would
    // have to wait for it. Unknown notifications are ignored, as JSON-RPC asks.
    if (method != "notifications/cancelled" || !params.is_object()) return;
    const auto request = params.find("requestId");
    if (request == params.end()) return;
    for (auto it = calls_.begin(); it != calls_.end(); ++it) {
        if (it->second == *request) {
            const std::uint64_t call = it->first;
            calls_.erase(it);
            runner_.cancel(call);
            return;
        }
    }
    for (auto it = resource_calls_.begin(); it != resource_calls_.end(); ++it) {
        if (it->second == *request) {
            const std::uint64_t call = it->first;
            resource_calls_.erase(it);
            resources_->cancel(call);
            return;
        }
    }
}

void McpSession::initialize(const json& id, const json& params) {
    const auto requested = params.find("protocolVersion");
    if (requested == params.end() || !requested->is_string())
        return reply_error(id, kInvalidParams, "Invalid params: protocolVersion must be a string");
    version_ = std::string(kProtocolVersions[0]);
    for (const auto v : kProtocolVersions)
        if (*requested == v) version_ = std::string(v);
    initialized_ = true;
    json capabilities = {{"tools", {{"listChanged", false}}}};
    if (resources_ != nullptr) capabilities["resources"] = {{"subscribe", true}, {"listChanged", false}};
    reply(id, {{"protocolVersion", version_},
               {"capabilities", std::move(capabilities)},
               {"serverInfo", {{"name", "ptyvisor"}, {"title", "ptyvisor terminals"}, {"version", server_version_}}},
               {"instructions", kInstructions}});
}

void McpSession::call_tool(const json& id, const json& params) {
    const auto name = params.find("name");
    if (name == params.end() || !name->is_string())
        return reply_error(id, kInvalidParams, "Invalid params: name must be a string");
    if (!is_known_tool(name->get<std::string>()))
        return reply_error(id, kInvalidParams, "Invalid params: unknown tool '" + name->get<std::string>() + "'");
    const json arguments = params.value("arguments", json::object());
    if (!arguments.is_object()) return reply_error(id, kInvalidParams, "Invalid params: arguments must be an object");
    ToolArgs args;
    std::string why;
    if (!parse_tool_arguments(name->get<std::string>(), arguments, args, why))
        return reply(
            id, tool_result_json(ToolResult::error("Invalid arguments for " + name->get<std::string>() + ": " + why)));
    if (calls_.size() >= kMaxCallsInFlight)
        return reply(
            id, tool_result_json(ToolResult::error("Too many tool calls in flight (" +
                                                   std::to_string(kMaxCallsInFlight) + "): wait for one to finish")));
    const std::uint64_t call = next_call_++;
    calls_.emplace(call, id);
    runner_.start(call, args);  // may complete() at once
}

void McpSession::complete(std::uint64_t call, const ToolResult& result) {
    const auto it = calls_.find(call);
    if (it == calls_.end()) return;  // cancelled
    const json id = it->second;
    calls_.erase(it);
    reply(id, tool_result_json(result));
}

void McpSession::reply(const json& id, json result) {
    send_(dump({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}));
}

void McpSession::reply_error(const json& id, int code, const std::string& message) {
    send_(dump({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}}));
}

}  // namespace ptyvisor::cli::mcp
