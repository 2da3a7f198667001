// CommandRecord: one command a session's shell ran, as its OSC 133 marks told
// (docs/protocol.md, 11.2). Shared by COMMAND_LIST, EXECUTED, WAITED, EVENT and LIST's
// `last_command`.
//
// A record is what the session's own output said: its strings are bounded (kMaxText) and
// valid UTF-8, its offsets ordered (output_start <= output_end), and nothing more is known.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/payloads.h"

namespace ptyvisor::protocol {

struct CommandRecord {
    static constexpr std::size_t kMaxText = 2048;  // command and cwd, each

    std::uint64_t seq = 0;  // 1, 2, ... in the order the commands started
    std::string command;    // the command line, "" when the shell reported none
    std::string cwd;        // from the last OSC 7 before it, "" when none
    std::uint64_t output_start = 0;             // just past its C mark
    std::optional<std::uint64_t> output_end;    // its D mark's first byte; nullopt while it runs
    std::optional<int> exit_code;               // 0..255; nullopt while it runs, or when D had none
    std::int64_t started_ms = 0;                // Unix milliseconds
    std::optional<std::int64_t> ended_ms;
    [[nodiscard]] bool ended() const { return output_end.has_value(); }
    bool operator==(const CommandRecord&) const = default;
};

std::string encode(const CommandRecord& v);
Decoded<CommandRecord> decode_command_record(std::string_view json);

}  // namespace ptyvisor::protocol
