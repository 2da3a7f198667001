// Payloads of protocol version 2: sessions that outlive their connection
// (docs/protocol.md, section 9). Requests come from clients and are hostile: each decoder
// bounds every member and refuses what it does not expect, like those of payloads.h.
// Replies come from the daemon.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/command_record.h"
#include "protocol/frame.h"
#include "protocol/payloads.h"

namespace ptyvisor::protocol {

// Longest pattern WAIT accepts, and longest quiet time and timeout.
inline constexpr std::size_t kMaxPatternLength = 1024;
inline constexpr std::uint64_t kMaxWaitMs = 24ull * 3600 * 1000;
// Most bytes one READ returns.
inline constexpr std::uint64_t kMaxReadBytes = 64ull * 1024 * 1024;

// Whether `id` is 32 lowercase hex digits.
bool is_session_id(std::string_view id);

// Where in a session's output log: its first byte still held, its end, or an offset.
struct LogPosition {
    enum class Kind { Start, Tail, Offset };
    Kind kind = Kind::Start;
    std::uint64_t offset = 0;
    bool operator==(const LogPosition&) const = default;
};

enum class State { Starting, Running, Exited };
std::string_view to_string(State state);

struct AttachRequest {
    std::string id;
    LogPosition from{LogPosition::Kind::Tail, 0};
    bool observe = false;   // "role": "observer"; else "controller"
    bool takeover = false;  // a controller takes the present one's place
    bool terminal = false;  // version 3: the client relays a real terminal (it answers queries)
    bool operator==(const AttachRequest&) const = default;
};

struct AttachedReply {
    std::string id;
    std::string unit;
    std::int64_t pid = 0;
    bool observe = false;
    std::uint64_t start = 0;   // first offset the log still holds
    std::uint64_t end = 0;     // offset after its last byte, now
    std::uint64_t offset = 0;  // where the OUTPUT that follows begins
    State state = State::Running;
    WindowSize size;
    // Version 5's members (docs/protocol.md, 12), sent in every version.
    bool may_control = false;  // this requester may take the terminal (a supervisor, root)
    bool held = false;         // a person holds the terminal now
    std::optional<std::int64_t> controller_uid{};
    std::optional<std::int64_t> controller_since{};  // Unix ms
    bool operator==(const AttachedReply&) const = default;
};

struct DetachedReply {
    std::uint64_t offset = 0;          // the next byte this client would have been sent
    std::string reason = "detached";   // "detached" or "taken_over"
    bool operator==(const DetachedReply&) const = default;
};

// What a session has cost (version 6), from its cgroup; a member is absent where the host
// does not count it.
struct UsageInfo {
    std::optional<std::uint64_t> cpu_usec, memory_current, memory_peak, tasks_current, tasks_peak, oom_kills,
        tasks_limit_hits, io_read_bytes, io_write_bytes;
    bool operator==(const UsageInfo&) const = default;
};

struct SessionInfo {
    std::string id;
    std::string unit;
    std::vector<std::string> argv;
    std::string cwd;
    State state = State::Running;
    std::optional<ExitStatus> exit;  // once Exited
    std::int64_t pid = 0;
    std::uint64_t start = 0;   // first offset the log still holds
    std::uint64_t offset = 0;  // bytes of output so far (the log's end)
    std::uint32_t clients = 0;
    std::int64_t created = 0;  // Unix seconds
    bool detached = false;
    // Version 4's members (docs/protocol.md, 11.5), sent in every version.
    std::optional<std::string> shell;  // "bash" or "zsh": started with shell integration
    bool at_prompt = false;
    bool waiting_for_input = false;
    std::optional<std::int64_t> waiting_since;  // Unix ms
    std::optional<CommandRecord> last_command;
    // Version 5's members (docs/protocol.md, 12), sent in every version, only when true/held.
    bool held = false;  // a person holds the terminal ("controller": "supervisor")
    std::optional<std::int64_t> controller_uid{};
    std::optional<std::int64_t> controller_since{};  // Unix ms
    bool recording = false;  // the daemon keeps an asciicast recording of it (RECORDING)
    // Version 6's members (docs/protocol.md, 13), sent in every version, only when known.
    std::string profile;              // its sandbox profile; empty: none (a fixed field)
    std::optional<UsageInfo> usage;
    bool operator==(const SessionInfo&) const = default;
};

// SESSIONS as a whole: the entries, and (version 5) what the requester may do.
struct SessionsReply {
    std::vector<SessionInfo> sessions;
    bool truncated = false;
    std::optional<std::string> role;  // "agent", "observer", "supervisor" or "root"
};

struct ReadRequest {
    std::string id;
    LogPosition from;
    std::uint64_t max_bytes = 1024 * 1024;
    bool operator==(const ReadRequest&) const = default;
};

struct LogReply {
    std::string id;
    std::uint64_t start = 0;   // first offset the log holds
    std::uint64_t offset = 0;  // where the bytes that follow begin
    std::uint64_t length = 0;  // how many follow, in OUTPUT frames
    std::uint64_t end = 0;     // the log's end
    State state = State::Running;
    std::optional<ExitStatus> exit;
    bool operator==(const LogReply&) const = default;
};

struct WaitRequest {
    enum class For { Exit, Quiet, Text, Command, Prompt, Input };  // the last three: version 4
    std::string id;
    For what = For::Exit;
    std::uint64_t quiet_ms = 0;  // For::Quiet: 1..kMaxWaitMs
    std::string pattern;         // For::Text: an RE2 regular expression
    LogPosition from;            // For::Text: where to search from
    std::optional<std::uint64_t> after;  // For::Command: a command with a greater seq ends
    std::uint64_t timeout_ms = 30'000;
    bool operator==(const WaitRequest&) const = default;
};

struct WaitReply {
    bool matched = false;
    // "exit", "quiet", "text", "command", "prompt", "input", "timeout", or "exited" (can no
    // longer match)
    std::string reason;
    State state = State::Running;
    std::optional<ExitStatus> exit;
    std::uint64_t offset = 0;  // the log's end when the wait ended
    std::uint64_t match_start = 0, match_end = 0;  // For::Text, when matched
    std::optional<CommandRecord> command;          // For::Command, when matched
    bool operator==(const WaitReply&) const = default;
};

struct KillRequest {
    std::string id;
    int signal = 0;  // 0: end the session as STOP does; else 1..64 to its processes
    bool operator==(const KillRequest&) const = default;
};

struct KillReply {
    std::string id;
    State state = State::Running;
    std::optional<ExitStatus> exit;
    bool operator==(const KillReply&) const = default;
};

struct SendRequest {
    std::string id;
    std::span<const std::uint8_t> input;  // into the frame's payload
};

struct SentReply {
    std::uint64_t bytes = 0;
    bool operator==(const SentReply&) const = default;
};

struct DroppedNotice {
    std::uint64_t offset = 0;  // the next OUTPUT begins here
    std::uint64_t lost = 0;    // bytes this client will never be sent
    bool operator==(const DroppedNotice&) const = default;
};

std::string encode(const AttachRequest& v);
std::string encode(const AttachedReply& v);
std::string encode(const DetachedReply& v);
// SESSIONS: {"sessions": [...]}, and "truncated": true when the oldest were left out to fit.
std::string encode(const std::vector<SessionInfo>& v, bool truncated = false);
// The same reply built from entries, so that a server can encode what never changes in a
// session (id, unit, argv, cwd, created) once, and only the rest per LIST:
//   entry = session_entry(session_fixed_fields(info), info)
// session_fixed_fields() is a JSON object; session_entry() adds the changing fields to it.
std::string session_fixed_fields(const SessionInfo& v);
std::string session_entry(std::string_view fixed_fields, const SessionInfo& v);
std::string encode_sessions(const std::vector<std::string>& entries, bool truncated,
                            const std::optional<std::string>& role = std::nullopt);
std::string encode(const ReadRequest& v);
std::string encode(const LogReply& v);
std::string encode(const WaitRequest& v);
std::string encode(const WaitReply& v);
std::string encode(const KillRequest& v);
std::string encode(const KillReply& v);
std::string encode(const SentReply& v);
std::string encode(const DroppedNotice& v);
std::vector<std::uint8_t> encode_send(std::string_view id, std::span<const std::uint8_t> input);

Decoded<AttachRequest> decode_attach(std::string_view json);
Decoded<AttachedReply> decode_attached(std::string_view json);
Decoded<DetachedReply> decode_detached(std::string_view json);
Decoded<std::vector<SessionInfo>> decode_sessions(std::string_view json);
Decoded<SessionsReply> decode_sessions_reply(std::string_view json);
Decoded<ReadRequest> decode_read(std::string_view json);
Decoded<LogReply> decode_log(std::string_view json);
Decoded<WaitRequest> decode_wait(std::string_view json);
Decoded<WaitReply> decode_waited(std::string_view json);
Decoded<KillRequest> decode_kill(std::string_view json);
Decoded<KillReply> decode_killed(std::string_view json);
Decoded<SentReply> decode_sent(std::string_view json);
Decoded<DroppedNotice> decode_dropped(std::string_view json);
Decoded<SendRequest> decode_send(std::span<const std::uint8_t> payload);

}  // namespace ptyvisor::protocol
