// Payloads: the JSON bodies of START, STARTED, RESIZE, SIGNAL, EXIT, ERROR and STATUS.
//
// Decoders treat their input as hostile: they accept only a JSON object with the documented
// members and types, reject unknown members' wrong types, check every number's range, every
// length and count against a bound and nesting against a depth, and never throw. Encoders
// produce exactly what the decoders accept. A decoder's Decoded<T> is the protocol's form of
// the "false with why" convention (docs/architecture.md, "Error conventions").
#pragma once

#include <cstdint>
#include <map>
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
inline constexpr std::size_t kMaxProfileNameLength = 64;  // START's profile (version 6)
// The longest ERROR message the daemon sends, in bytes, before JSON escaping. Messages
// quote what clients sent (a command name, a cgroup path), so every one is cut to this.
inline constexpr std::size_t kMaxErrorMessageBytes = 1024;

// `text` cut to at most `max_bytes` bytes at a UTF-8 character boundary, with "..." in
// place of what was cut. Bytes that are not UTF-8 are left for the JSON encoder to replace.
std::string bounded_text(std::string_view text, std::size_t max_bytes);

// STATUS (docs/protocol.md 5.7) bounds: each string, the session list and the refusal counts.
inline constexpr std::size_t kMaxStatusNameBytes = 64;    // version, backend, error code names
inline constexpr std::size_t kMaxStatusUnitBytes = 256;   // as in STARTED
inline constexpr std::size_t kMaxStatusArgv0Bytes = 1024;
inline constexpr std::size_t kMaxStatusSessions = 4096;   // more never fit kMaxStatusPayloadSize
inline constexpr std::size_t kMaxStatusRejectedCodes = 64;
inline constexpr std::size_t kMaxStatusStartResults = kMaxStatusRejectedCodes + 1;  // "started" too

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
    bool terminal = false;          // version 3: the client relays a real terminal (it answers queries)
    bool shell_integration = false;  // version 4: start the shell with its integration (11.2)
    std::string profile;             // version 6: the sandbox profile's name; empty: the default
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
    // Version 6 (a client of an older version is told exit_status_for_version's reason).
    OomKill,        // "oom-kill": the kernel's OOM killer ended the main process (memory_max)
    RuntimeLimit,   // "runtime-limit": the profile's runtime_max passed
    IdleTimeout,    // "idle-timeout": no output and no input for the profile's idle_timeout
};

std::string_view to_string(ExitReason reason);
std::optional<ExitReason> exit_reason_from_string(std::string_view name);
// Every reason's name, in the enum's order (STATUS counts sessions ended by each).
std::vector<std::string_view> exit_reason_names();

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

// The daemon's report to root. Unlike the control payloads it nests: `sessions` is an array of
// objects and `counters.rejected` (and `starts`, `ended`) an object, two levels below the top
// and no deeper (older clients refuse deeper: a session's usage figures are its members).
struct StatusReply {
    struct Session {
        std::string unit;             // at most kMaxStatusUnitBytes
        std::int64_t pid = 0;         // the command's main PID, 0..INT32_MAX (0: not known yet)
        std::int64_t peer_pid = 0;    // the client's PID, 0..INT32_MAX
        std::int64_t started_at = 0;  // Unix time in seconds, >= 0
        std::uint64_t bytes_in = 0;   // INPUT bytes received
        std::uint64_t bytes_out = 0;  // OUTPUT bytes sent
        std::string argv0;            // at most kMaxStatusArgv0Bytes
        std::string id;               // the session's id (version 2 daemons)
        std::uint64_t clients = 0;    // connections attached
        bool detached = false;        // outlives its connection
        // Since metrics (absent from older daemons, which listed live sessions only):
        // "starting", "running", "ending" or "ended"; the sandbox profile ("" when none);
        // and what the session has cost, each figure only where its cgroup says it (on the
        // wire, members of the session object; a usage with no figure is sent as none).
        std::optional<std::string> state{};    // at most kMaxStatusNameBytes
        std::optional<std::string> profile{};  // at most kMaxStatusNameBytes
        struct Usage {
            std::optional<std::uint64_t> cpu_usec{}, memory_current{}, memory_peak{}, tasks_current{},
                tasks_peak{}, oom_kills{}, tasks_limit_hits{}, io_read_bytes{}, io_write_bytes{};
            bool operator==(const Usage&) const = default;
        };
        std::optional<Usage> usage{};
        bool operator==(const Session&) const = default;
    };
    struct Counters {
        std::uint64_t accepted = 0;
        std::uint64_t rate_limited = 0;
        std::uint64_t handshake_timeouts = 0;
        std::uint64_t evicted = 0;
        // Connections dropped at accept because their peer had already closed; absent from
        // daemons before it was counted (and then not shown).
        std::optional<std::uint64_t> hung_up;
        // Sessions whose processes outlived their cleanup (unkillable: blocked in a request
        // that is never answered), left for a later cleanup; absent from older daemons.
        std::optional<std::uint64_t> quarantined;
        // By error code name (at most kMaxStatusNameBytes), at most kMaxStatusRejectedCodes.
        std::map<std::string, std::uint64_t> rejected;
        // Since metrics; each absent from older daemons (and then left out of the metrics).
        // STARTs by result: "started", or the error code that refused it (start_failed, ...);
        // at most kMaxStatusRejectedCodes + 1 names.
        std::optional<std::map<std::string, std::uint64_t>> starts{};
        // Sessions ended, by ExitReason name (at most kMaxStatusRejectedCodes names).
        std::optional<std::map<std::string, std::uint64_t>> ended{};
        // INPUT and OUTPUT bytes relayed over the daemon's life, ended sessions included.
        std::optional<std::uint64_t> relayed_in{}, relayed_out{};
        std::optional<std::uint64_t> screen_worker_restarts{};
        // STARTs that waited for the backend's recheck of their peer, and the time they
        // waited in all, in microseconds.
        std::optional<std::uint64_t> admission_waits{}, admission_wait_usec{};
        bool operator==(const Counters&) const = default;
    };

    std::string version;  // at most kMaxStatusNameBytes, as the backend's name
    std::string backend;
    std::vector<Session> sessions;  // at most kMaxStatusSessions
    Counters counters;
    // The sessions did not fit in kMaxStatusPayloadSize and were left out (the list is empty).
    bool truncated = false;
    bool operator==(const StatusReply&) const = default;
};

// What a client speaking `version` is told: a reason of a later version becomes the older
// reason that says the most (oom-kill: exited, with unit_result "oom-kill"; the limits:
// timeout), since an older client treats an unknown reason as a malformed EXIT.
ExitStatus exit_status_for_version(ExitStatus status, int version);
std::optional<ExitStatus> exit_status_for_version(const std::optional<ExitStatus>& status, int version);

std::string encode(const StartRequest& v);
std::string encode(const Started& v);
std::string encode(const WindowSize& v);
std::string encode(const SignalRequest& v);
std::string encode(const ExitStatus& v);
// Always within the ERROR bound (kMaxControlPayloadSize): the message is cut as needed.
std::string encode(const ErrorReply& v);
// Always within kMaxStatusPayloadSize: strings are cut to their bounds (invalid UTF-8 and NUL
// replaced by U+FFFD first), and sessions that do not fit are left out, with `truncated`.
std::string encode(const StatusReply& v);

Decoded<StartRequest> decode_start(std::string_view json);
Decoded<Started> decode_started(std::string_view json);
Decoded<WindowSize> decode_resize(std::string_view json);
Decoded<SignalRequest> decode_signal(std::string_view json);
Decoded<ExitStatus> decode_exit(std::string_view json);
Decoded<ErrorReply> decode_error(std::string_view json);
Decoded<StatusReply> decode_status(std::string_view json);

}  // namespace ptyvisor::protocol
