#include "cli/mcp/mcp_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "cli/mcp/daemon_runner.h"
#include "cli/mcp/mcp_session.h"
#include "cli/mcp/session_subscriptions.h"
#include "cli/options.h"
#include "cli/relay.h"
#include "client/client.h"

namespace ptyvisor::cli::mcp {
namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
// Replies waiting for the client beyond this: stop reading requests until it catches up.
constexpr std::size_t kOutputHighWater = 16 * 1024 * 1024;
// Once stdin has closed, how long the calls in flight may still take (a KILL that waits for
// the session's end needs up to the daemon's 15 s cleanup bound).
constexpr std::chrono::milliseconds kShutdownGrace{20'000};

// Newline-delimited messages from stdin, each bounded by kMaxLineBytes.
class LineReader {
  public:
    explicit LineReader(McpSession& session) : session_(session) {}

    void feed(std::string_view bytes) {
        while (!bytes.empty()) {
            const auto newline = bytes.find('\n');
            const auto piece = bytes.substr(0, newline);
            if (!skipping_) buffer_.append(piece);
            if (!skipping_ && buffer_.size() > kMaxLineBytes) {
                skipping_ = true;
                buffer_.clear();
                buffer_.shrink_to_fit();
                session_.line_too_long();
            }
            if (newline == std::string_view::npos) return;
            if (!skipping_) session_.handle_line(buffer_);
            buffer_.clear();
            skipping_ = false;
            bytes.remove_prefix(newline + 1);
        }
    }

    // End of input: a last line without its newline still counts.
    void finish() {
        if (!skipping_ && !buffer_.empty()) session_.handle_line(buffer_);
        buffer_.clear();
    }

  private:
    McpSession& session_;
    std::string buffer_;
    bool skipping_ = false;
};

// Writes what it can of `pending` to stdout. False when stdout has gone.
bool write_some(std::string& pending) {
    while (!pending.empty()) {
        const ssize_t n = ::write(STDOUT_FILENO, pending.data(), pending.size());
        if (n > 0) {
            pending.erase(0, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        return false;
    }
    return true;
}

// stdout's file status flags, put back on return: the descriptor may be shared (a terminal
// when a person tries the server by hand), and others expect it blocking.
class StdoutFlags {
  public:
    StdoutFlags() : flags_(::fcntl(STDOUT_FILENO, F_GETFL)) {}
    ~StdoutFlags() {
        if (flags_ >= 0) ::fcntl(STDOUT_FILENO, F_SETFL, flags_);
    }
    StdoutFlags(const StdoutFlags&) = delete;
    StdoutFlags& operator=(const StdoutFlags&) = delete;
    // O_NONBLOCK, so that a slow client never stalls the loop. -errno on failure.
    int make_non_blocking() const {
        if (flags_ < 0 || ::fcntl(STDOUT_FILENO, F_SETFL, flags_ | O_NONBLOCK) < 0) return -errno;
        return 0;
    }

  private:
    int flags_;
};

int fail(const std::string& why) {
    std::cerr << "ptyvisor mcp: " << why << '\n' << std::flush;
    return kFailure;
}

}  // namespace

int mcp_command(const McpOptions& options) {
    // A client that goes away is a write error (EPIPE), handled, not a signal that kills us.
    ::signal(SIGPIPE, SIG_IGN);
    const StdoutFlags stdout_flags;
    if (const int r = stdout_flags.make_non_blocking(); r < 0)
        return fail(client::errno_message("cannot make stdout non-blocking", r));

    std::string pending;  // replies not yet written
    const auto send = [&pending](std::string line) {
        pending += line;
        pending += '\n';
    };
    McpSession* session_ptr = nullptr;
    DaemonRunner runner(
        resolve_socket_path(options.socket, std::getenv(client::kSocketEnvironmentVariable)),
        [&session_ptr](std::uint64_t call, const ToolResult& result) { session_ptr->complete(call, result); });
    McpSession session(runner, send, options.version);
    session_ptr = &session;
    SessionSubscriptions resources(
        resolve_socket_path(options.socket, std::getenv(client::kSocketEnvironmentVariable)),
        [&session](std::uint64_t call, const ResourceReply& reply) { session.complete_resource(call, reply); },
        [&session](const std::string& uri, std::string_view event) { session.resource_updated(uri, event); });
    session.set_resources(resources);
    LineReader reader(session);

    bool input_open = true;
    std::vector<pollfd> fds;
    std::vector<std::uint64_t> owners;
    std::vector<std::uint64_t> resource_owners;
    std::string chunk(kReadChunk, '\0');
    for (;;) {
        if (!input_open && session.calls_in_flight() == 0 && pending.empty()) return 0;
        fds.clear();
        owners.clear();
        const bool reading = input_open && pending.size() < kOutputHighWater;
        fds.push_back({reading ? STDIN_FILENO : -1, POLLIN, 0});
        fds.push_back({pending.empty() ? -1 : STDOUT_FILENO, POLLOUT, 0});
        runner.collect(fds, owners);
        resource_owners.clear();
        resources.collect(fds, resource_owners);
        const int runner_timeout = runner.poll_timeout_ms(), resources_timeout = resources.poll_timeout_ms();
        const int timeout = runner_timeout < 0 || resources_timeout < 0 ? std::max(runner_timeout, resources_timeout)
                                                                       : std::min(runner_timeout, resources_timeout);
        if (::poll(fds.data(), fds.size(), timeout) < 0) {
            if (errno == EINTR) continue;
            return fail(client::errno_message("poll", errno));
        }
        if (fds[1].revents != 0 && !write_some(pending)) return 0;  // the client has gone
        if (fds[0].revents != 0) {
            const ssize_t n = ::read(STDIN_FILENO, chunk.data(), chunk.size());
            if (n > 0) {
                reader.feed(std::string_view(chunk.data(), static_cast<std::size_t>(n)));
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                reader.finish();
                input_open = false;
                runner.limit_deadlines(kShutdownGrace);
            }
        }
        runner.dispatch(fds, 2, owners);
        resources.dispatch(fds, 2 + owners.size(), resource_owners);
        if (!pending.empty() && !write_some(pending)) return 0;
    }
}

}  // namespace ptyvisor::cli::mcp
