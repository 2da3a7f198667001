// The JSON the console speaks (docs/console-api.md): session objects as /api/sessions and
// /ws/events show them, the terminal socket's messages to the page, and the page's requests
// parsed with bounds. No socket here, so that every shape is tested as text.
//
// The daemon's view of a session (protocol::SessionInfo) is first turned into a SessionRow;
// that conversion is the one place that knows which protocol version carries what.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/session_payloads.h"

namespace ptyvisor::web {

// Who holds a session's terminal: "agent" unless a supervisor took it (protocol v5).
struct ControllerView {
    bool held = false;                         // a supervisor holds it
    std::optional<std::int64_t> uid;           // the supervisor's uid, while held
    std::optional<std::int64_t> since_ms;      // while held
};

struct LastCommand {
    std::uint64_t seq = 0;
    std::string command;
    std::optional<int> exit_code;
    bool running = false;
};

struct SessionRow {
    std::string id;
    std::vector<std::string> argv;
    std::string cwd;
    protocol::State state = protocol::State::Running;
    std::optional<protocol::ExitStatus> exit;
    std::int64_t created = 0;
    std::uint32_t clients = 0;
    bool detached = false;
    std::uint64_t start = 0, offset = 0;
    ControllerView controller;
    bool waiting_for_input = false, at_prompt = false;
    std::optional<std::string> shell;
    std::optional<LastCommand> last_command;
    bool recording = false;
};

SessionRow row_from(const protocol::SessionInfo& info);

// Maps a uid to the name shown to the person ("alice"), or the uid as text when it has none.
using UserNamer = std::function<std::string(std::int64_t uid)>;
// getpwuid_r, in this process (the daemon sends no names: an NSS lookup could block its loop).
std::string system_user_name(std::int64_t uid);

// The exit object as the protocol encodes it (EXIT's payload).
nlohmann::json exit_json(const protocol::ExitStatus& status);
nlohmann::json session_json(const SessionRow& row, const UserNamer& names);
// {"sessions": [...], "role": role}; with `type` non-empty, {"type": type, ...} first.
std::string sessions_document(const std::vector<SessionRow>& rows, std::string_view role, const UserNamer& names,
                              std::string_view type = {});

// /ws/events when the daemon does not answer LIST: {"type": "unavailable", "message"}.
std::string unavailable_message(std::string_view message);

// /api/info. `may_control` is derived from the role: supervisor and root may take control.
bool role_may_control(std::string_view role);
std::string info_document(std::string_view user, std::int64_t uid, std::string_view role, std::string_view version);

// --- the terminal socket, server -> page -------------------------------------------------
struct AttachedView {
    std::string id;
    std::uint64_t offset = 0;
    std::uint32_t cols = 0, rows = 0;
    protocol::State state = protocol::State::Running;
    bool may_control = false;
    ControllerView controller;
};
std::string attached_message(const AttachedView& v, bool you, const UserNamer& names);
std::string controller_message(const ControllerView& v, bool you, const UserNamer& names);
std::string dropped_message(std::uint64_t offset, std::uint64_t lost);
// While a terminal prints faster than the page is sent its bytes: its screen at log offset
// `offset`, as `data` (render_screen) for the page to write after resetting the terminal.
// `streaming`: the output that follows is bytes again, from `offset` on (the flood is over).
// `skipped`: bytes of this flood the page was not sent.
struct ScreenView {
    std::uint64_t offset = 0;
    std::uint32_t cols = 0, rows = 0;
    std::string data;
    bool streaming = false;
    std::uint64_t skipped = 0;
};
std::string screen_message(const ScreenView& v);
std::string refused_message(std::string_view code, std::string_view message);
std::string exit_message(const protocol::ExitStatus& status);
std::string error_message(std::string_view code, std::string_view message);

// --- the terminal socket, page -> server -------------------------------------------------
struct InputMessage {
    std::string data;
};
struct TakeMessage {};
struct ReleaseMessage {};
struct ResizeMessage {
    std::uint16_t cols = 0, rows = 0;
};
struct InvalidMessage {
    std::string why;
};
using PageMessage = std::variant<InputMessage, TakeMessage, ReleaseMessage, ResizeMessage, InvalidMessage>;

inline constexpr unsigned kMaxTerminalSide = 1000;
// Parses one text frame (at most 64 KiB, bounded by the socket). Nothing in it is trusted:
// a missing or mistyped member, or a size out of 1..1000, is InvalidMessage.
PageMessage parse_page_message(std::string_view text);

}  // namespace ptyvisor::web
