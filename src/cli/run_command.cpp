#include "cli/run_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "cli/options.h"
#include "cli/relay.h"
#include "cli/terminal_mode.h"
#include "client/client.h"

namespace ptyvisor::cli {
namespace {

// How long `run --detach` waits for STARTED: the daemon answers within its own handshake and
// start bounds; this only bounds a daemon that has hung.
constexpr std::chrono::seconds kStartTimeout{60};

// START's options from ours, into `s`. False with `why` for a bad option value.
bool start_options(const RunOptions& o, client::StartOptions& s, int& winch_fd, std::string& why) {
    s.argv = o.command;
    if (!build_environment(o.clean_env ? std::vector<std::string>{} : current_environment(), o.clean_env,
                           o.env_settings, s.env, why))
        return false;
    s.term = resolve_term(o.term, s.env, std::getenv("TERM"));
    set_variable(s.env, "TERM", s.term);
    if (o.directory) s.cwd = *o.directory;
    s.detach = o.detach;
    s.shell_integration = o.shell_integration;
    s.profile = o.profile;
    // Our terminal answers the program's queries; without one the daemon's screen does.
    s.terminal = !o.detach && ::isatty(STDIN_FILENO) == 1;

    const int tty = ::isatty(STDIN_FILENO) ? STDIN_FILENO : ::isatty(STDOUT_FILENO) ? STDOUT_FILENO : -1;
    if (o.size) {
        if (!parse_size(*o.size, s.size, why)) return false;
        winch_fd = -1;  // a size asked for stays
    } else {
        s.size = terminal_size(tty).value_or(protocol::WindowSize{.rows = 24, .cols = 80});
        winch_fd = tty;
    }
    return true;
}

int failure(std::string& message, const std::string& why) {
    message = "ptyvisor: " + why;
    return kFailure;
}

std::string error_text(const protocol::ErrorReply& e) {
    std::string text = e.message + " (" + std::string(protocol::to_string(e.code)) + ")";
    if (e.code == protocol::ErrorCode::UnsupportedVersion)
        text += ": this daemon is older than this client and does not offer what it needs "
                "(shell integration needs protocol version 4, --profile version 6)";
    return text;
}

// --detach: START, then STARTED's id on stdout; the session goes on when we close.
int start_detached(client::Connection& connection, const client::StartOptions& start, std::string& message) {
    std::string why;
    if (!connection.start(start, why)) return failure(message, why);
    const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
    std::vector<client::Event> events;
    while (!connection.finished()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return failure(message, "the daemon did not start the session within 60 s");
        if (!client::wait_for_events(connection, left, events, why)) return failure(message, why);
        for (auto& event : events) {
            if (auto* started = std::get_if<client::Started>(&event)) {
                if (started->id.empty())
                    return failure(message, "the daemon does not keep sessions (protocol version 1); "
                                            "the session ends now that we leave");
                std::cout << started->id << '\n' << std::flush;
                return std::cout ? 0 : failure(message, "cannot write the session's id to stdout");
            }
            if (auto* error = std::get_if<client::Error>(&event)) return failure(message, error_text(error->reply));
            if (auto* violation = std::get_if<client::ProtocolViolation>(&event))
                return failure(message, "protocol error from the daemon: " + violation->message);
            if (std::holds_alternative<client::Closed>(event))
                return failure(message, "connection to the daemon lost");
        }
    }
    return failure(message, "connection to the daemon lost");
}

// The session from our options to its end: our exit status, and in `message` what to print
// once the terminal is restored (when this returns).
int run_session(const RunOptions& options, std::string& message) {
    std::string why;
    client::StartOptions start;
    int winch_fd = -1;
    if (!start_options(options, start, winch_fd, why)) return failure(message, why);
    client::Connection connection;
    const std::string socket = resolve_socket_path(options.socket, std::getenv(client::kSocketEnvironmentVariable));
    // Until connected, a signal ends us as it ends any program: there is no session yet,
    // and the terminal is not raw. The connect itself waits for a bounded time.
    if (!connection.connect(socket, why)) return failure(message, why);
    if (const int r = options.detach ? 0 : block_relayed_signals(); r < 0)
        return failure(message, client::errno_message("cannot block the signals the session relays", r));
    if (options.detach) return start_detached(connection, start, message);
    // Raw before START: keys typed from now on reach the session as they are, and no
    // ^C typed early is turned into a local signal that flushes typed-ahead input.
    std::optional<RawMode> raw;
    if (const int r = RawMode::enter(STDIN_FILENO, raw); r < 0)
        return failure(message, client::errno_message("cannot set raw mode", r));
    if (!connection.start(start, why)) return failure(message, why);
    RelayOptions relay;
    relay.mode = RelayMode::Run;
    relay.stdin_is_tty = raw.has_value();
    relay.winch_fd = winch_fd;
    relay.quiet = options.quiet;
    relay.socket = socket;
    relay.reattach_grace = reattach_grace_from_environment();
    return relay_session(connection, relay, message);
}

}  // namespace

int run_command(const RunOptions& options) {
    std::string message;
    const int code = run_session(options, message);
    if (!message.empty()) std::cerr << message << '\n' << std::flush;
    return code;
}

}  // namespace ptyvisor::cli
