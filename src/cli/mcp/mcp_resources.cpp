// McpSession's resources/* requests (mcp_session.h): the JSON-RPC side of sessions as
// resources. What they are (URIs, contents) is session_resources.h's; the ResourceRunner
// talks to the daemon.
#include "cli/mcp/mcp_session.h"
#include "cli/mcp/session_resources.h"

namespace ptyvisor::cli::mcp {

using nlohmann::json;

void McpSession::resource_request(const json& id, const std::string& method, const json& params) {
    constexpr int kMethodNotFound = -32601;
    if (resources_ == nullptr) return reply_error(id, kMethodNotFound, "Method not found: " + method);
    if (method == "resources/templates/list") return reply(id, session_resource_templates());
    const bool list = method == "resources/list";
    const bool takes_uri = method == "resources/read" || method == "resources/subscribe" ||
                           method == "resources/unsubscribe";
    if (!list && !takes_uri) return reply_error(id, kMethodNotFound, "Method not found: " + method);
    std::string session;
    if (takes_uri) {
        const auto uri = params.find("uri");
        if (uri == params.end() || !uri->is_string())
            return reply_error(id, kResourceInvalidParams, "Invalid params: uri must be a string");
        const auto parsed = session_id_of(uri->get<std::string>());
        if (!parsed)
            return reply_error(id, kResourceNotFound,
                               "Resource not found: " + uri->get<std::string>() + " (the resources are " +
                                   std::string(kSessionUriPrefix) + "ID, ID a session's 32 hex digits)");
        session = *parsed;
    }
    if (calls_in_flight() >= kMaxCallsInFlight)
        return reply_error(id, kResourceInternalError,
                           "Too many requests in flight (" + std::to_string(kMaxCallsInFlight) + ")");
    const std::uint64_t call = next_call_++;
    resource_calls_.emplace(call, id);
    // Each may complete_resource() at once.
    if (list) return resources_->list(call);
    if (method == "resources/read") return resources_->read(call, session);
    if (method == "resources/subscribe") return resources_->subscribe(call, session);
    resources_->unsubscribe(call, session);
}

void McpSession::complete_resource(std::uint64_t call, const ResourceReply& r) {
    const auto it = resource_calls_.find(call);
    if (it == resource_calls_.end()) return;  // cancelled
    const json id = it->second;
    resource_calls_.erase(it);
    if (r.error_code != 0) return reply_error(id, r.error_code, r.message);
    reply(id, r.result);
}

void McpSession::resource_updated(const std::string& uri, std::string_view event) {
    const json notification = {{"jsonrpc", "2.0"},
                               {"method", "notifications/resources/updated"},
                               {"params", {{"uri", uri}, {"_meta", {{"event", std::string(event)}}}}}};
    send_(notification.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace ptyvisor::cli::mcp
