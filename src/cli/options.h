// The pure parts of the CLI's option handling: parsing --size and -e, building the session's
// environment, choosing TERM and the socket path; and for the session commands, --from,
// --for, --timeout and signal names. No I/O here, so all of it is
// unit-tested (options_test.cpp). A bad option value is false with `why`, a message that
// names the option and the value (docs/architecture.md, "Error conventions").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/payloads.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::cli {

// "COLSxROWS", e.g. "132x40", each 1..65535, into `out`. False with `why` otherwise.
bool parse_size(std::string_view text, protocol::WindowSize& out, std::string& why);

// The environment as `environ` holds it: "NAME=VALUE" entries.
std::vector<std::string> current_environment();

// The session's environment, into `out`: `inherited` (unless `clean`), then each -e
// NAME=VALUE setting, which replaces every earlier entry of that name. False with `why` for a
// setting that is not NAME=VALUE with a non-empty NAME.
bool build_environment(const std::vector<std::string>& inherited, bool clean, const std::vector<std::string>& settings,
                       std::vector<std::string>& out, std::string& why);

// The value of NAME in `env` (first entry wins, as getenv does), or nullopt.
std::optional<std::string> find_variable(const std::vector<std::string>& env, std::string_view name);

// Replaces every NAME entry of `env` with one NAME=value at the end.
void set_variable(std::vector<std::string>& env, std::string_view name, std::string_view value);

// TERM for the session: --term, else TERM set by -e, else the client's own TERM, else "dumb".
std::string resolve_term(const std::optional<std::string>& flag,
                         const std::vector<std::string>& settings_env,
                         const char* client_term);

// --socket, else $PTYVISOR_SOCKET (when non-empty), else the daemon's default.
std::string resolve_socket_path(const std::optional<std::string>& flag, const char* env_value);

// A session id as the commands take it: 32 lowercase hex digits. False with `why` otherwise.
bool check_session_id(std::string_view text, std::string& why);

// --from: "start", "tail" or an offset (decimal, unsigned 64-bit), into `out`. False with `why`.
bool parse_log_position(std::string_view text, protocol::LogPosition& out, std::string& why);

// --for of `ptyvisor wait`: "exit", "quiet:MS" (1..86400000), "text:REGEX" (a non-empty
// pattern of at most 1024 bytes), or, protocol version 4, "command", "prompt" or "input",
// into `out`'s what, quiet_ms and pattern. False with `why`.
bool parse_wait_condition(std::string_view text, protocol::WaitRequest& out, std::string& why);

// --after of `ptyvisor wait --for command`: a command seq (decimal, unsigned 64-bit). False
// with `why`.
bool parse_command_seq(std::string_view text, std::uint64_t& out, std::string& why);

// The one command line `ptyvisor exec` types: COMMAND's words joined by single spaces, as
// ssh joins its command's words (the shell in the session splits them again). False with
// `why` when there is nothing to run, or the line is one EXEC cannot carry (a newline or
// another control character, more than 16 KiB, not UTF-8).
bool exec_line(const std::vector<std::string>& words, std::string& out, std::string& why);

// --timeout of `ptyvisor wait`: seconds, a decimal number such as 30 or 0.5, at most 86400,
// into milliseconds (rounded up). False with `why`.
bool parse_timeout_seconds(std::string_view text, std::uint64_t& milliseconds, std::string& why);

// -s of `ptyvisor kill`: a name with or without SIG, in any case (TERM, SIGTERM, int), or a
// number 1..64, into `out`. False with `why`.
bool parse_signal(std::string_view text, int& out, std::string& why);

}  // namespace ptyvisor::cli
