// ResourceRunner: what answers the resources/* requests of an McpSession (mcp_session.h),
// like ToolRunner for tools/call: each request is a `call` key, answered exactly once with
// McpSession::complete_resource(), possibly later, unless cancel() reaches it first.
// Subscriptions outlive their request: the runner reports changes with
// McpSession::resource_updated() until unsubscribe().
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace ptyvisor::cli::mcp {

// JSON-RPC error codes of the resources requests.
inline constexpr int kResourceNotFound = -32002;  // the MCP specification's
inline constexpr int kResourceInvalidParams = -32602;
inline constexpr int kResourceInternalError = -32603;

// The answer to one resources/* request: its result, or an error (error_code != 0).
struct ResourceReply {
    nlohmann::json result;
    int error_code = 0;
    std::string message;

    static ResourceReply ok(nlohmann::json result) { return {std::move(result), 0, {}}; }
    static ResourceReply error(int code, std::string message) { return {nullptr, code, std::move(message)}; }
};

class ResourceRunner {
  public:
    virtual ~ResourceRunner() = default;
    virtual void list(std::uint64_t call) = 0;
    // `id` is a session id (protocol::is_session_id).
    virtual void read(std::uint64_t call, const std::string& id) = 0;
    virtual void subscribe(std::uint64_t call, const std::string& id) = 0;
    virtual void unsubscribe(std::uint64_t call, const std::string& id) = 0;
    virtual void cancel(std::uint64_t call) = 0;
};

}  // namespace ptyvisor::cli::mcp
