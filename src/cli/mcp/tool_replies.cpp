#include "cli/mcp/tool_replies.h"

#include <string.h>

namespace ptyvisor::cli::mcp {

using nlohmann::json;

std::string error_text(const protocol::ErrorReply& e) {
    return "ptyvisord refused: " + e.message + " (" + std::string(protocol::to_string(e.code)) + ")";
}

json exit_json(const std::optional<protocol::ExitStatus>& exit) {
    if (!exit) return nullptr;
    json j = json::object();
    switch (exit->kind) {
        case protocol::ExitStatus::Kind::Exited:
            j["status"] = "exited";
            j["code"] = exit->code;
            break;
        case protocol::ExitStatus::Kind::Signaled: {
            j["status"] = "signaled";
            j["signal"] = exit->signal;
            const char* name = ::sigabbrev_np(exit->signal);
            if (name != nullptr) j["signal_name"] = std::string("SIG") + name;
            j["core_dumped"] = exit->core_dumped;
            break;
        }
        case protocol::ExitStatus::Kind::Unknown:
            j["status"] = "unknown";
            break;
    }
    j["shell_status"] = exit->shell_status();
    j["reason"] = std::string(protocol::to_string(exit->reason));
    return j;
}

std::string state_name(protocol::State s) { return std::string(protocol::to_string(s)); }

}  // namespace ptyvisor::cli::mcp
