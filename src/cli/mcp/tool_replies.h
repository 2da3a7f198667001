// What the tools' results make of the daemon's replies, in the same words for every tool.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "protocol/payloads.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::cli::mcp {

// A refusal (ERROR) of the daemon, as a tool error's text.
std::string error_text(const protocol::ErrorReply& e);
// An exit status as the tools' `exit` member (schema::exit_property): null while running.
nlohmann::json exit_json(const std::optional<protocol::ExitStatus>& exit);
// A session's state as the tools' `state` member.
std::string state_name(protocol::State s);

}  // namespace ptyvisor::cli::mcp
