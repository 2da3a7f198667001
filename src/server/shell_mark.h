// ShellMark: one OSC 133 or OSC 7 mark a shell wrote, as the screen worker found it in a
// session's output (screen_broker.h). The worker is untrusted: the broker checks each field's
// bound before a mark reaches the session, and a session whose output forges marks can only
// lie about its own commands (docs/security.md, "Command records").
//
// Offsets are the session's output log offsets (absolute, output_log.h):
//  - Prompt (A), CommandInput (B), OutputStart (C), Cwd (OSC 7): just past the mark's last byte;
//  - CommandEnd (D): the mark's first byte, so that a command's output is [C's offset, D's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ptyvisor::server {

struct ShellMark {
    // The most bytes of `text` (a command line, a path): longer ones are cut by the worker.
    static constexpr std::size_t kMaxText = 2048;

    enum class Kind : std::uint8_t {
        Prompt = 1,        // OSC 133;A: the prompt starts
        CommandInput = 2,  // OSC 133;B: the prompt ends, the user types a command
        OutputStart = 3,   // OSC 133;C: the command runs, its output follows
        CommandEnd = 4,    // OSC 133;D[;status]: the command ended
        Cwd = 5,           // OSC 7;file://host/path: the working directory
    };

    Kind kind = Kind::Prompt;
    std::uint64_t offset = 0;
    std::optional<int> exit_code;  // CommandEnd with a status: 0..255
    // OutputStart: the command line (OSC 133;C;cmdline_url=..., percent-decoded);
    // Cwd: the path (percent-decoded). Valid UTF-8, at most kMaxText bytes; else empty.
    std::string text;
};

}  // namespace ptyvisor::server
