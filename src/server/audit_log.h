// The audit log: one structured record per act (SPEC round 3, `ptyvisor audit`; issue 30 §2;
// docs/policy.md lists the kinds, their fields and their MESSAGE_IDs).
//
// A record is fields, never prose: the same fields go to the journal (PTYVISOR_<NAME>, with
// a MESSAGE_ID per kind and SYSLOG_IDENTIFIER=ptyvisord) or, where there is no journal, to a
// JSON-lines file ({"kind": ..., "time": ..., "session": ..., <name>: ...}).
//
// Invariants:
//  - Nothing an agent chose reaches a sink unbounded: argv is cut at kMaxArgvBytes, other
//    strings at kMaxFieldBytes (each with a marker saying how much was cut), and every string
//    is made valid UTF-8. Secrets are replaced by "[secret]" before anything is bounded or
//    formatted (AuditLog::record's `secrets`).
//  - Writing never blocks the event loop. The journal gets one datagram on a non-blocking
//    socket: when journald's queue is full the record is dropped and counted (dropped()),
//    never waited for. The file is a local root-owned regular file written with one write(2)
//    per record, as recordings are (server/recording.h): the page cache takes it.
//  - The file is the daemon's alone: created 0600 with O_NOFOLLOW in a directory only root
//    can write (common/private_directory.h), refused when it is not a regular file of ours
//    with one link and no group or other permission. It grows to max_bytes, then becomes
//    FILE.1 (replacing the previous one) and a new FILE starts: at most twice max_bytes.
//
// Not thread-safe; the event loop's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/unique_fd.h"

namespace ptyvisor::server {

enum class AuditKind { Start, Decision, Attach, Takeover, Send, Kill, Exec, End };
inline constexpr AuditKind kAuditKinds[] = {AuditKind::Start, AuditKind::Decision, AuditKind::Attach,
                                            AuditKind::Takeover, AuditKind::Send, AuditKind::Kill,
                                            AuditKind::Exec, AuditKind::End};

const char* to_string(AuditKind kind);                     // "start", ...
std::optional<AuditKind> parse_audit_kind(std::string_view name);
const char* audit_message_id(AuditKind kind);              // 32 hex digits, fixed forever

inline constexpr std::size_t kMaxArgvBytes = 8192;         // all of argv's words together
inline constexpr std::size_t kMaxArgvWords = 256;
inline constexpr std::size_t kMaxFieldBytes = 4096;        // any other string
inline constexpr std::size_t kMaxEnvNames = 256;
inline constexpr std::string_view kSecretMarker = "[secret]";

// One act. Empty strings, empty lists and unset numbers are absent from the record.
struct AuditRecord {
    AuditKind kind = AuditKind::Start;
    std::int64_t time_usec = 0;               // wall clock, µs since the epoch; 0: when recorded
    std::string session;                      // the session's id; empty for a START refused
    std::vector<std::string> argv;            // start, decision, exec
    std::string cwd;                          // start, decision
    std::vector<std::string> env_names;       // start: the names the START set, never values
    std::string profile;                      // start
    std::optional<std::int64_t> peer_pid;     // who acted: the agent, a client, a supervisor
    std::optional<std::int64_t> peer_uid;
    std::string unit;                         // the peer's systemd unit
    std::string rule;                         // start, decision: "FILE:LINE" or "default"
    std::string decision;                     // start: allow|deny|ask; decision: approved|denied|timeout
    std::string reason;
    std::string approver;                     // decision: who decided ("uid 1000 (alice)")
    std::string mode;                         // attach: "control" or "observe"
    std::string text;                         // send: what was typed
    std::optional<std::int64_t> bytes;        // send: its length before any cut
    std::optional<std::int64_t> signal;       // kill: the signal sent; end: the one that ended it
    std::optional<std::int64_t> pid;          // exec
    std::optional<std::int64_t> ppid;         // exec
    std::optional<std::int64_t> exit_status;  // end
};

// A record's fields, in order, after bounding: what both sinks write. The names are the JSON
// keys; the journal's are "PTYVISOR_" and the name in upper case.
using AuditValue = std::variant<std::string, std::int64_t, std::vector<std::string>>;
struct AuditField {
    std::string name;
    AuditValue value;
};
std::vector<AuditField> audit_fields(const AuditRecord& record);

// What type each field the sinks may write has (for a reader of the journal, which has only
// strings). Integers are decimal, lists are JSON arrays of strings in the journal.
enum class AuditFieldType { String, Integer, Strings };
struct AuditFieldInfo {
    const char* name;
    AuditFieldType type;
};
std::span<const AuditFieldInfo> audit_field_table();

// `text` with each occurrence of each non-empty secret replaced by kSecretMarker, the longest
// secret first (so that one that holds another is replaced whole).
std::string redact(std::string_view text, std::span<const std::string> secrets);

// "2026-12-02T14:35:44.123456Z".
std::string format_audit_time(std::int64_t time_usec);

// One JSON object, with "kind", "time", "time_usec", "session" (null when empty) first.
std::string audit_json_line(const AuditRecord& record);

// The journal's fields: MESSAGE_ID, MESSAGE (a one-line summary), PRIORITY,
// SYSLOG_IDENTIFIER, PTYVISOR_KIND, PTYVISOR_TIME_USEC, PTYVISOR_SESSION, PTYVISOR_<NAME>...
std::vector<std::string> audit_journal_fields(const AuditRecord& record);

// The journal's native protocol (systemd.io/JOURNAL_NATIVE_PROTOCOL): "KEY=value\n", or
// "KEY\n", a 64-bit little-endian length, the value and "\n" for a value holding a newline.
std::string journal_datagram(std::span<const std::string> fields);

// The journal as a sink: one datagram per record on a non-blocking socket connected to
// journald's (or a test's).
class JournalSink {
public:
    static constexpr const char* kDefaultSocket = "/run/systemd/journal/socket";
    // 0, or -errno when the socket cannot be made or connected.
    int open(const std::string& socket_path = kDefaultSocket);
    // 0 when sent, 1 when dropped (journald's queue is full), -errno otherwise. A journald
    // that restarted (the socket it had is gone) is connected to again, once per record.
    int write(const AuditRecord& record);
    [[nodiscard]] std::uint64_t dropped() const { return dropped_; }

private:
    int connect();

    std::string path_;
    UniqueFd socket_;
    std::uint64_t dropped_ = 0;
};

// The JSON-lines file as a sink.
class FileSink {
public:
    static constexpr std::uint64_t kDefaultMaxBytes = 64ull << 20;
    // Opens (creating) `directory`/`name`. 0, or -errno: -EPERM for a directory or a file
    // that is not ours alone, -ELOOP or -EINVAL for a file that is a symlink or not regular.
    int open(const std::string& directory, const std::string& name, std::uint64_t max_bytes = kDefaultMaxBytes);
    // 0, or -errno (the record is then lost; a partial line is cut off again).
    int write(const AuditRecord& record);
    [[nodiscard]] std::uint64_t size() const { return size_; }

private:
    int open_file();
    int rotate();

    UniqueFd directory_;
    UniqueFd file_;
    std::string name_;
    std::uint64_t max_bytes_ = kDefaultMaxBytes;
    std::uint64_t size_ = 0;
};

// The daemon's audit log: the journal when journald listens, else the file.
class AuditLog {
public:
    struct Options {
        std::string journal_socket = JournalSink::kDefaultSocket;
        std::string directory = "/run/ptyvisor";  // the state directory
        std::string file_name = "audit.jsonl";
        std::uint64_t max_bytes = FileSink::kDefaultMaxBytes;
    };
    // 0, or -errno when neither sink could be opened (the daemon should refuse to start:
    // an audit that silently records nothing is worse than none). `why` says what failed.
    int open(const Options& options, std::string& why);
    // Stamps the time (when unset), redacts `secrets` from argv, cwd and text, bounds and
    // writes the record. Never throws; a failure is counted (failed()) and logged once.
    void record(AuditRecord record, std::span<const std::string> secrets = {});

    [[nodiscard]] bool to_journal() const { return journal_.has_value(); }
    [[nodiscard]] std::uint64_t written() const { return written_; }
    [[nodiscard]] std::uint64_t dropped() const { return journal_ ? journal_->dropped() : 0; }
    [[nodiscard]] std::uint64_t failed() const { return failed_; }

private:
    std::optional<JournalSink> journal_;
    std::optional<FileSink> file_;
    std::uint64_t written_ = 0;
    std::uint64_t failed_ = 0;
};

}  // namespace ptyvisor::server
