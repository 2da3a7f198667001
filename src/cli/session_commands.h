// The commands on sessions that outlive their connection (protocol version 2,
// docs/protocol.md section 9). Each names its session by id, 32 lowercase hex digits.
//
//   ptyvisor ls [--json]                      LIST: a table, or a JSON array
//   ptyvisor attach [--observe] [--from P] [--detach-keys K] [--takeover] ID
//                                             ATTACH, relayed like run (relay.h)
//   ptyvisor logs [--from P] [--follow] ID    READ; --follow: ATTACH as an observer
//   ptyvisor send [--keys] ID TEXT...         SEND
//   ptyvisor wait [--timeout S] [--for C] [--from P] [--after N] ID
//                                             WAIT; --for command prints the command's
//                                             record (one JSON line) on stdout
//   ptyvisor kill [-s SIGNAL] ID              KILL
//
// Exit status: 255 with the reason on stderr when the daemon refuses or cannot be reached.
// Otherwise 0, except: attach, and wait for exit, exit with the session's status as run does
// (0 when attach detached); wait exits 124 when its timeout passed first, and 1 when the
// session exited before a quiet or text condition held.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/detach_keys.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::cli {

// `wait`'s status when its timeout passes first, as timeout(1) has it.
inline constexpr int kTimedOut = 124;

struct ListOptions {
    std::optional<std::string> socket;
    bool json = false;
};

struct AttachOptions {
    std::optional<std::string> socket;
    bool observe = false;
    std::string from = "start";
    std::string detach_keys = std::string(kDefaultDetachKeys);
    bool takeover = false;
    std::string id;
};

struct LogsOptions {
    std::optional<std::string> socket;
    std::string from = "start";
    bool follow = false;
    std::string id;
};

struct SendOptions {
    std::optional<std::string> socket;
    bool keys = false;
    std::string id;
    std::vector<std::string> text;
};

struct WaitOptions {
    std::optional<std::string> socket;
    std::optional<std::string> timeout;  // seconds; none: wait as long as it takes
    std::string condition = "exit";      // --for
    std::optional<std::string> from;     // --from, for text
    std::optional<std::string> after;    // --after, for command
    std::string id;
};

struct KillOptions {
    std::optional<std::string> socket;
    std::optional<std::string> signal;  // -s; none: end the session
    std::string id;
};

int list_command(const ListOptions& options);
int attach_command(const AttachOptions& options);
int logs_command(const LogsOptions& options);
int send_command(const SendOptions& options);
int wait_command(const WaitOptions& options);
int kill_command(const KillOptions& options);

// --- the pure parts, unit-tested (session_commands_test.cpp) ----------------------------

// The table of `ls`: ID, STATE ("input" for a program that waits for input), EXIT, CLIENTS, OFFSET (bytes written), AGE (from `now`, Unix
// seconds) and COMMAND, one line per session under a header line.
std::string format_sessions(const std::vector<protocol::SessionInfo>& sessions, std::int64_t now);

// `ls --json`: an array of objects {id, argv, state ("running"/"exited"), exit (null, or
// {status, code | signal and core, reason, unit_result?}), offset, start, clients, created,
// cwd, detached, unit, pid, shell (null, "bash" or "zsh"), at_prompt, waiting_for_input,
// last_command (null, or {seq, command, exit_code, running})}.
std::string sessions_json(const std::vector<protocol::SessionInfo>& sessions);

// "5s", "3m", "2h", "4d".
std::string format_age(std::int64_t seconds);

// What `send` sends: the arguments joined by spaces, or with `keys`, each argument's key
// bytes (send_keys.h) one after the other.
std::string send_payload(bool keys, const std::vector<std::string>& text);

// `wait`'s exit status for WAITED `reply` to a wait for `what`, and in `message` what to say
// on stderr ("" for nothing).
int wait_status(const protocol::WaitReply& reply, protocol::WaitRequest::For what, std::string& message);

}  // namespace ptyvisor::cli
