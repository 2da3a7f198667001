// The commands on a session's shell commands (protocol version 4, docs/protocol.md section 11):
//
//   ptyvisor exec [--timeout S] [--interrupt] [--json] ID -- COMMAND...
//                                   EXEC, then READ of the command's output
//   ptyvisor commands [--json] [--since N] ID
//                                   COMMANDS: the session's command records
//
// exec's exit status: the command's; 124 when --timeout passed first (the command still
// runs, unless --interrupt ended it: then the status the shell reported, 130 for Ctrl-C);
// 125 when the command waits for input (it still runs; stderr says how to answer); 255 with
// the reason on stderr when the daemon refuses (no shell integration, another exec running,
// no such session, the session ended) or cannot be reached. With --json: 0 once the object
// is printed (it holds the status), 255 as above when there is none to print.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/command_payloads.h"

namespace ptyvisor::cli {

// exec's status when the command waits for input on the terminal.
inline constexpr int kWaitingForInput = 125;
// The most output `exec --json` carries; past it the output is cut and `truncated` is true.
inline constexpr std::uint64_t kMaxJsonOutput = 16 * 1024 * 1024;

struct ExecOptions {
    std::optional<std::string> socket;
    std::optional<std::string> timeout;  // seconds; none: as long as the daemon allows (24 h)
    bool interrupt = false;
    bool json = false;
    std::string id;
    std::vector<std::string> command;
};

struct CommandsOptions {
    std::optional<std::string> socket;
    bool json = false;
    std::optional<std::string> since;
    std::string id;
};

int exec_command(const ExecOptions& options);
int commands_command(const CommandsOptions& options);

// --- the pure parts, unit-tested (exec_command_test.cpp) --------------------------------

// Plain exec's exit status for `reply`, and in `message` what to say on stderr ("" for
// nothing).
int exec_status(const protocol::ExecReply& reply, std::string& message);

// `exec --json`: {exit_code, state, output, truncated, seq}, with "interrupted": true or
// "session_ended": true when the protocol's state was one of those (`state` is then
// "exited"). `output` is made valid UTF-8 (invalid bytes become U+FFFD).
std::string exec_json(const protocol::ExecReply& reply, const std::string& output, bool truncated);

// The table of `commands`: SEQ, EXIT, DURATION, CWD, COMMAND, the running command last.
std::string format_commands(const protocol::CommandListReply& list);

// "850ms", "12.3s", "4m05s", "2h03m".
std::string format_duration(std::int64_t milliseconds);

}  // namespace ptyvisor::cli
