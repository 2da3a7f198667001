#include "cli/screen_command.h"

#include <chrono>
#include <iostream>

#include "cli/options.h"
#include "cli/relay.h"
#include "client/blocking.h"
#include "client/default_socket.h"

namespace ptyvisor::cli {
namespace {

// A snapshot is answered within the daemon's deadline for its screen worker (5 s).
constexpr std::chrono::milliseconds kSnapshotTimeout{30'000};

int failure(const std::string& why) {
    std::cerr << "ptyvisor: " << why << '\n' << std::flush;
    return kFailure;
}

}  // namespace

std::string screen_text(const protocol::ScreenReply& screen) {
    std::string text;
    for (const auto& line : screen.scrollback) text += line + '\n';
    for (const auto& line : screen.lines) text += line + '\n';
    return text;
}

int screen_command(const ScreenOptions& options) {
    std::string why;
    if (!check_session_id(options.id, why)) return failure(why);
    if (options.attributes && !options.json) return failure("--attributes needs --json");
    if (options.scrollback > protocol::kMaxScrollbackLines)
        return failure("--scrollback is at most " + std::to_string(protocol::kMaxScrollbackLines));
    client::Connection connection;
    const auto socket = resolve_socket_path(options.socket, std::getenv(client::kSocketEnvironmentVariable));
    if (!connection.connect(socket, why)) return failure(why);
    if (!connection.queue_snapshot({options.id, options.scrollback, options.attributes}, why)) return failure(why);
    client::Transcript t;
    if (!client::run_to_completion(connection, kSnapshotTimeout, t, why)) return failure(why);
    if (t.error) return failure(t.error->message + " (" + std::string(protocol::to_string(t.error->code)) + ")");
    if (t.violation) return failure("protocol error from the daemon: " + *t.violation);
    if (!t.screen) return failure("connection to the daemon lost");
    std::cout << (options.json ? t.screen->json + '\n' : screen_text(t.screen->screen)) << std::flush;
    return std::cout ? 0 : kFailure;
}

}  // namespace ptyvisor::cli
