#include "cli/mcp/session_resources.h"

#include "cli/mcp/tool_replies.h"
#include "protocol/command_record.h"

namespace ptyvisor::cli::mcp {

using nlohmann::json;

std::string session_uri(std::string_view id) { return std::string(kSessionUriPrefix) + std::string(id); }

std::optional<std::string> session_id_of(std::string_view uri) {
    if (!uri.starts_with(kSessionUriPrefix)) return std::nullopt;
    std::string id(uri.substr(kSessionUriPrefix.size()));
    if (!protocol::is_session_id(id)) return std::nullopt;
    return id;
}

namespace {

json record_json(const protocol::CommandRecord& r) {
    return json::parse(protocol::encode(r), nullptr, /*allow_exceptions=*/false);
}

std::string command_line(const std::vector<std::string>& argv) {
    std::string line;
    for (const auto& a : argv) {
        if (!line.empty()) line += ' ';
        line += a;
    }
    return line.size() > 200 ? line.substr(0, 200) + "..." : line;
}

}  // namespace

json session_resource_list(const std::vector<protocol::SessionInfo>& sessions) {
    json resources = json::array();
    for (const auto& s : sessions)
        resources.push_back({{"uri", session_uri(s.id)},
                             {"name", s.id},
                             {"title", command_line(s.argv)},
                             {"description", "ptyvisor session (" + state_name(s.state) + ")"},
                             {"mimeType", kSessionMimeType}});
    return {{"resources", std::move(resources)}};
}

json session_resource_templates() {
    return {{"resourceTemplates",
             json::array({{{"uriTemplate", std::string(kSessionUriPrefix) + "{id}"},
                           {"name", "session"},
                           {"title", "A ptyvisor session"},
                           {"description", "A session's state, its shell's prompt and input waits, and its recent "
                                           "commands. Subscribe to be told when a command ends, a program waits "
                                           "for input, or the session exits."},
                           {"mimeType", kSessionMimeType}}})}};
}

json session_resource_contents(const protocol::SessionInfo& info,
                               const std::optional<protocol::CommandListReply>& commands) {
    json recent = json::array();
    std::uint64_t first_seq = 0;
    json current = nullptr;
    if (commands) {
        const auto& ended = commands->commands;
        const std::size_t skip = ended.size() > kMaxRecentCommands ? ended.size() - kMaxRecentCommands : 0;
        for (std::size_t i = skip; i < ended.size(); ++i) recent.push_back(record_json(ended[i]));
        first_seq = commands->first_seq;
        if (commands->current) current = record_json(*commands->current);
    }
    json body = {{"id", info.id},
                 {"state", state_name(info.state)},
                 {"exit", exit_json(info.exit)},
                 {"shell", info.shell ? json(*info.shell) : json(nullptr)},
                 {"at_prompt", commands ? commands->at_prompt : info.at_prompt},
                 {"waiting_for_input", commands ? commands->waiting_for_input : info.waiting_for_input},
                 {"waiting_since", info.waiting_since ? json(*info.waiting_since) : json(nullptr)},
                 {"offset", info.offset},
                 {"held_by_person", info.held},
                 {"last_command", info.last_command ? record_json(*info.last_command) : json(nullptr)},
                 {"current_command", std::move(current)},
                 {"recent_commands", std::move(recent)},
                 {"first_seq", first_seq}};
    const std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
    return {{"contents", json::array({{{"uri", session_uri(info.id)}, {"mimeType", kSessionMimeType}, {"text", text}}})}};
}

bool notifies(protocol::SessionEvent::Kind kind) {
    using Kind = protocol::SessionEvent::Kind;
    return kind == Kind::CommandEnd || kind == Kind::Input || kind == Kind::Exit;
}

}  // namespace ptyvisor::cli::mcp
