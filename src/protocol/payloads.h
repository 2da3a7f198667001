// Control payloads: the JSON bodies of START, STARTED, RESIZE, SIGNAL, EXIT and ERROR.
//
// Decoders treat their input as hostile: they accept only a JSON object with the documented
// members and types, reject unknown members' wrong types, check every number's range and
// every count against a bound, and never throw. Encoders produce exactly what the decoders
// accept.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/error_code.h"
#include "protocol/frame.h"

namespace ptyvisor::protocol {

inline constexpr std::size_t kMaxArgc = 4096;
inline constexpr std::size_t kMaxEnvc = 4096;
inline constexpr std::size_t kMaxTermLength = 128;
// The longest ERROR message the daemon sends, in bytes, before JSON escaping. Messages
// quote what clients sent (a command name, a cgroup path), so every one is cut to this.
inline constexpr std::size_t kMaxErrorMessageBytes = 1024;

// `text` cut to at most `max_bytes` bytes at a UTF-8 character boundary, with "..." in
// place of what was cut. Bytes that are not UTF-8 are left for the JSON encoder to replace.
std::string bounded_text(std::string_view text, std::size_t max_bytes);

// A decoder's answer: the value, or a human-readable reason it was refused.
template <class T>
struct Decoded {
    std::optional<T> value;
    std::string error;

    explicit operator bool() const { return value.has_value(); }
    static Decoded fail(std::string why) { return {std::nullopt, std::move(why)}; }
};

struct WindowSize {
    std::uint16_t rows = 24;
    std::uint16_t cols = 80;
    bool operator==(const WindowSize&) const = default;
};

struct StartRequest {
    std::vector<std::string> argv;  // non-empty; argv[0] is resolved through PATH of env
    std::vector<std::string> env;   // "NAME=VALUE" entries
    std::uint64_t cwd_dev = 0;      // st_dev of the directory fd sent with START
    std::uint64_t cwd_ino = 0;      // st_ino of that directory
    std::string term;               // TERM for the session; empty means "dumb"
    WindowSize size;
    bool detach = false;            // version 2: the session outlives this connection
    bool operator==(const StartRequest&) const = default;
};

struct Started {
    std::string unit;
    std::int64_t pid = 0;
    std::string id;  // the session's id (the unit name's 32 hex digits); absent before 0.2
    bool operator==(const Started&) const = default;
};

enum class SignalTarget { Foreground, Session };

struct SignalRequest {
    int signal = 0;  // Linux signal number, 1..64
    SignalTarget target = SignalTarget::Foreground;
    bool operator==(const SignalRequest&) const = default;
};

// Why the session ended, from the supervisor's side.
enum class ExitReason {
    Exited,         // the command ended on its own
    Stopped,        // the client sent STOP
    Disconnected,   // the client went away (never sent: recorded in logs)
    ClientStalled,  // the client did not read output within the operation timeout
    DrainTimeout,   // the command ended but its terminal stayed open past the drain timeout
    Shutdown,       // the daemon is stopping
    InputFailed,    // writing to the terminal failed
    OutputFailed,   // reading from the terminal failed
    Timeout,        // the unit hit RuntimeMaxSec
    BackendFailed,  // the backend lost the session
};

std::string_view to_string(ExitReason reason);
std::optional<ExitReason> exit_reason_from_string(std::string_view name);

struct ExitStatus {
    enum class Kind { Exited, Signaled, Unknown };
    Kind kind = Kind::Unknown;
    int code = 0;             // Kind::Exited: 0..255
    int signal = 0;           // Kind::Signaled: 1..64
    bool core_dumped = false; // Kind::Signaled
    std::string unit_result;  // systemd's Result ("success", "timeout", "oom-kill", ...) or ""
    ExitReason reason = ExitReason::Exited;
    bool operator==(const ExitStatus&) const = default;

    // The status a shell would report: code, or 128+signal; 255 when unknown.
    [[nodiscard]] int shell_status() const;
};

struct ErrorReply {
    ErrorCode code = ErrorCode::Internal;
    std::string message;
    bool operator==(const ErrorReply&) const = default;
};

std::string encode(const StartRequest& v);
std::string encode(const Started& v);
std::string encode(const WindowSize& v);
std::string encode(const SignalRequest& v);
std::string encode(const ExitStatus& v);
// Always within the ERROR bound (kMaxControlPayloadSize): the message is cut as needed.
std::string encode(const ErrorReply& v);

Decoded<StartRequest> decode_start(std::string_view json);
Decoded<Started> decode_started(std::string_view json);
Decoded<WindowSize> decode_resize(std::string_view json);
Decoded<SignalRequest> decode_signal(std::string_view json);
Decoded<ExitStatus> decode_exit(std::string_view json);
Decoded<ErrorReply> decode_error(std::string_view json);

}  // namespace ptyvisor::protocol
