// Sessions as MCP resources (modelcontextprotocol.io, specification, server/resources): what
// `ptyvisor mcp` lists, reads and tells of, without I/O. Unit-tested (session_resources_test.cpp).
//
// A session is the resource `ptyvisor://sessions/ID` (ID: 32 lowercase hex digits). Its
// contents are one small JSON text: the session's state and exit, whether its shell is at its
// prompt or a program waits for input, its last command, and the newest kMaxRecentCommands
// command records (docs/protocol.md, section 11). Each record's strings are bounded by the
// protocol (2048 bytes each), so the text stays within a few tens of KiB.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/command_payloads.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::cli::mcp {

inline constexpr std::string_view kSessionUriPrefix = "ptyvisor://sessions/";
inline constexpr std::string_view kSessionMimeType = "application/json";
// The ended command records a resource shows, newest last.
inline constexpr std::size_t kMaxRecentCommands = 8;

std::string session_uri(std::string_view id);
// The session id of `uri`, if it is one of ours.
std::optional<std::string> session_id_of(std::string_view uri);

// resources/list's result for these sessions.
nlohmann::json session_resource_list(const std::vector<protocol::SessionInfo>& sessions);
// resources/templates/list's result.
nlohmann::json session_resource_templates();
// resources/read's result: `info` from LIST, `commands` from COMMANDS when the daemon
// answered it (a session without shell integration, or a daemon older than version 4, has
// no records).
nlohmann::json session_resource_contents(const protocol::SessionInfo& info,
                                         const std::optional<protocol::CommandListReply>& commands);

// Whether an EVENT of this kind is told to a subscriber. command_end, input and exit change
// what a client waits for; command_start is what the client itself just caused, and prompt is
// followed by input once the shell waits at it, so both stay quiet.
bool notifies(protocol::SessionEvent::Kind kind);

}  // namespace ptyvisor::cli::mcp
