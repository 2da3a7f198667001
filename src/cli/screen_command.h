// ptyvisor screen [--json] [--scrollback N] [--attributes] ID: what a session's terminal
// shows (SNAPSHOT, protocol version 3, docs/protocol.md section 10).
//
// Plain: the scrollback lines asked for (oldest first), then every row of the screen, each
// on a line of its own with trailing blanks trimmed, as `tmux capture-pane -p` prints a
// pane. --json: the SCREEN payload as the daemon sent it. --attributes needs --json.
// Exit status: 0, or 255 with the reason on stderr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/screen_payloads.h"

namespace ptyvisor::cli {

struct ScreenOptions {
    std::optional<std::string> socket;
    bool json = false;
    std::uint32_t scrollback = 0;
    bool attributes = false;
    std::string id;
};

int screen_command(const ScreenOptions& options);

// The plain text of a reply: scrollback then rows, one line each, newline-terminated.
std::string screen_text(const protocol::ScreenReply& screen);

}  // namespace ptyvisor::cli
