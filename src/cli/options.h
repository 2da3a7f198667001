// The pure parts of `ptyvisor run`'s option handling: parsing --size and -e, building the
// session's environment, choosing TERM and the socket path. No I/O here, so all of it is
// unit-tested (options_test.cpp). A bad option value is false with `why`, a message that
// names the option and the value (docs/architecture.md, "Error conventions").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/payloads.h"

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

}  // namespace ptyvisor::cli
