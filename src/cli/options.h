// The pure parts of `ptyvisor run`'s option handling: parsing --size and -e, building the
// session's environment, choosing TERM and the socket path. No I/O here, so all of it is
// unit-tested (options_test.cpp).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/payloads.h"

namespace ptyvisor::cli {

// A bad option value; the message names the option and the value.
class OptionError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// "COLSxROWS", e.g. "132x40", each 1..65535. Throws OptionError otherwise.
protocol::WindowSize parse_size(std::string_view text);

// The environment as `environ` holds it: "NAME=VALUE" entries.
std::vector<std::string> current_environment();

// The session's environment: `inherited` (unless `clean`), then each -e NAME=VALUE setting,
// which replaces every earlier entry of that name. Throws OptionError for a setting that is
// not NAME=VALUE with a non-empty NAME.
std::vector<std::string> build_environment(const std::vector<std::string>& inherited, bool clean,
                                           const std::vector<std::string>& settings);

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
