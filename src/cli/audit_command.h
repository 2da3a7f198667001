// `ptyvisor audit [--session ID] [--since TIME] [--json] [--file PATH]`: reads the daemon's
// audit records back (server/audit_log.h; docs/policy.md), as journalctl would.
//
// Where from: --file PATH, else the state directory's audit file when it exists (the daemon
// writes it where there is no journal), else the system journal through sd-journal, matched
// on the audit's MESSAGE_IDs and SYSLOG_IDENTIFIER=ptyvisord.
//
// Who may read: the file is root's alone (0600), so root; the journal as journald decides
// (root and the groups systemd-journal, adm, wheel). Nothing here widens that.
//
// Output: with --json one JSON object a line, {"kind", "time", "time_usec", "session", ...the
// act's fields}, the file's records as written and the journal's rebuilt into the same form;
// otherwise a table for a person, where control characters (an agent's escape sequences in a
// SEND) are shown escaped, never sent to the terminal. Exit status 0, or 255 with the reason
// on stderr.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ptyvisor::cli {

inline constexpr const char* kDefaultAuditFile = "/run/ptyvisor/audit.jsonl";

struct AuditOptions {
    std::optional<std::string> session;  // --session ID
    std::optional<std::string> since;    // --since TIME
    bool json = false;                   // --json
    std::optional<std::string> file;     // --file PATH
};

int audit_command(const AuditOptions& options);

// --- the pure parts, unit-tested (audit_command_test.cpp) -------------------------------

// --since: "2026-12-02T14:00:00Z", "2026-12-02 14:00[:SS[.ffffff]]", "2026-12-02" (no zone:
// local time, as journalctl reads it; "Z" or "+HH:MM" for a zone), "@UNIX_SECONDS", or a time
// before now: "-30s", "-10min", "-2h", "-1d", "-1w" (units: us, ms, s, sec, m, min, h, hour,
// d, day, w, week, and plurals). False with `why`.
bool parse_since(std::string_view text, std::int64_t now_usec, std::int64_t& since_usec, std::string& why);

struct AuditFilter {
    std::optional<std::string> session;
    std::optional<std::int64_t> since_usec;
};
bool audit_matches(const nlohmann::ordered_json& record, const AuditFilter& filter);

using AuditSink = std::function<void(const nlohmann::ordered_json&)>;

// Reads PATH.1 (the older half, when it is there) then PATH, one record a line, and hands
// `sink` those that match. Lines that are not JSON objects are skipped and counted in
// `malformed`. False with `why` when PATH cannot be read.
bool read_audit_file(const std::string& path, const AuditFilter& filter, const AuditSink& sink,
                     std::uint64_t& malformed, std::string& why);

// A journal entry's fields (KEY -> value) as the record the file would hold.
nlohmann::ordered_json audit_record_from_journal(const std::map<std::string, std::string>& fields);

// The table: TIME (UTC), KIND, SESSION, DETAILS (the act's fields as name=value).
std::string format_audit_table(const std::vector<nlohmann::ordered_json>& records);

// `text` with C0 and C1 control characters, DEL and invalid UTF-8 shown as \r, \n, \t, \e or
// \xNN: safe to print on a terminal.
std::string printable(std::string_view text);

}  // namespace ptyvisor::cli
