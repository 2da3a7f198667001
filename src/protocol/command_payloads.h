// Payloads of protocol version 4: command-aware sessions (docs/protocol.md, section 11).
// Requests come from clients and are hostile: each decoder bounds every member and refuses
// what it does not expect, like those of session_payloads.h. Replies come from the daemon.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/command_record.h"
#include "protocol/payloads.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::protocol {

// The longest command line EXEC types, and its default timeout.
inline constexpr std::size_t kMaxExecCommand = 16384;
inline constexpr std::uint64_t kDefaultExecTimeoutMs = 30'000;

// Whether `line` is one command line EXEC may type: 1..kMaxExecCommand bytes of valid UTF-8
// with no control character but tab. False with `why`.
bool is_exec_command(std::string_view line, std::string& why);

struct CommandsRequest {
    std::string id;
    std::uint64_t since = 0;
    bool operator==(const CommandsRequest&) const = default;
};

struct CommandListReply {
    std::string id;
    std::optional<std::string> shell;  // "bash" or "zsh": started with shell integration
    bool at_prompt = false;
    bool waiting_for_input = false;
    std::optional<CommandRecord> current;  // running now
    std::vector<CommandRecord> commands;   // ended, seq > since, oldest first
    std::uint64_t first_seq = 0;           // the oldest kept; 0: none
    bool operator==(const CommandListReply&) const = default;
};

struct ExecRequest {
    std::string id;
    std::string command;
    std::uint64_t timeout_ms = kDefaultExecTimeoutMs;  // 1..kMaxWaitMs
    bool interrupt = false;  // Ctrl-C at the timeout, then up to kExecInterruptGraceMs more
    bool operator==(const ExecRequest&) const = default;
};
inline constexpr std::uint64_t kExecInterruptGraceMs = 5'000;

struct ExecReply {
    enum class Outcome { Exited, WaitingForInput, Timeout, Interrupted, SessionEnded };
    std::string id;
    Outcome state = Outcome::Exited;
    std::optional<int> exit_code;
    std::optional<CommandRecord> command;
    std::uint64_t offset = 0;  // the log's end at the reply
    State session_state = State::Running;
    bool operator==(const ExecReply&) const = default;
};
std::string_view to_string(ExecReply::Outcome outcome);

struct WatchRequest {
    std::string id;
    bool operator==(const WatchRequest&) const = default;
};

struct SessionEvent {
    enum class Kind { CommandStart, CommandEnd, Prompt, Input, Exit };
    Kind kind = Kind::Prompt;
    std::uint64_t offset = 0;
    std::optional<CommandRecord> command;  // CommandStart, CommandEnd
    std::int64_t since_ms = 0;             // Input
    std::optional<ExitStatus> exit;        // Exit
    bool operator==(const SessionEvent&) const = default;
};
std::string_view to_string(SessionEvent::Kind kind);

std::string encode(const CommandsRequest& v);
std::string encode(const CommandListReply& v);
std::string encode(const ExecRequest& v);
std::string encode(const ExecReply& v);
std::string encode(const WatchRequest& v);
std::string encode(const SessionEvent& v);

Decoded<CommandsRequest> decode_commands(std::string_view json);
Decoded<CommandListReply> decode_command_list(std::string_view json);
Decoded<ExecRequest> decode_exec(std::string_view json);
Decoded<ExecReply> decode_executed(std::string_view json);
Decoded<WatchRequest> decode_watch(std::string_view json);
Decoded<SessionEvent> decode_event(std::string_view json);

}  // namespace ptyvisor::protocol
