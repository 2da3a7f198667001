#include "cli/mcp/daemon_runner.h"

#include <algorithm>
#include <exception>

#include "cli/mcp/tool_definition.h"
#include "cli/mcp/tool_replies.h"

namespace ptyvisor::cli::mcp {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The daemon answers LIST, READ, SEND, START and a signal's KILL at once: this bounds one
// that hangs. A tool whose reply takes longer (WAIT, KILL without a signal) sets its own.
constexpr milliseconds kReplyTimeout{20'000};

}  // namespace

DaemonRunner::DaemonRunner(std::string socket_path, Complete complete)
    : socket_path_(std::move(socket_path)), complete_(std::move(complete)) {}

DaemonRunner::~DaemonRunner() = default;

void DaemonRunner::start(std::uint64_t key, const ToolArgs& args) {
    // Nothing may escape into the session's loop: a call that throws (out of memory, a bug of
    // ours) is that call's tool error.
    try {
        start_call(key, args);
    } catch (const std::exception& e) {
        calls_.erase(key);
        complete_(key, ToolResult::error(std::string("internal error: ") + e.what()));
    }
}

void DaemonRunner::start_call(std::uint64_t key, const ToolArgs& args) {
    auto call = std::make_unique<ToolCall>();
    call->key = key;
    call->tool = &tool_for(args);
    call->args = args;
    call->deadline = Clock::now() + kReplyTimeout;
    call->cursors = &cursors_;
    call->socket_path = &socket_path_;
    std::string why;
    if (!call->connection.connect(socket_path_, why))
        return complete_(key, ToolResult::error("cannot reach ptyvisord: " + why));
    if (!call->tool->request(*call, why)) return complete_(key, ToolResult::error(why));
    call->connection.flush();
    calls_.emplace(key, std::move(call));
}

void DaemonRunner::cancel(std::uint64_t key) { calls_.erase(key); }

void DaemonRunner::collect(std::vector<pollfd>& fds, std::vector<std::uint64_t>& owners) const {
    for (const auto& [key, call] : calls_) {
        const short events = static_cast<short>(POLLIN | (call->connection.wants_write() ? POLLOUT : 0));
        fds.push_back({call->connection.fd(), events, 0});
        owners.push_back(key);
    }
}

int DaemonRunner::poll_timeout_ms() const {
    if (calls_.empty()) return -1;
    auto nearest = Clock::time_point::max();
    for (const auto& [key, call] : calls_) nearest = std::min(nearest, call->deadline);
    const auto left = std::chrono::duration_cast<milliseconds>(nearest - Clock::now()).count() + 1;
    return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

void DaemonRunner::limit_deadlines(milliseconds grace) {
    closing_ = true;
    const auto latest = Clock::now() + grace;
    for (auto& [key, call] : calls_) call->deadline = std::min(call->deadline, latest);
}

void DaemonRunner::dispatch(const std::vector<pollfd>& fds, std::size_t first,
                            const std::vector<std::uint64_t>& owners) {
    for (std::size_t i = 0; i < owners.size(); ++i) {
        const auto it = calls_.find(owners[i]);
        if (it == calls_.end() || fds[first + i].revents == 0) continue;
        try {
            service(*it->second, fds[first + i].revents);
        } catch (const std::exception& e) {
            finish(owners[i], ToolResult::error(std::string("internal error: ") + e.what()));
        }
    }
    const auto now = Clock::now();
    std::vector<std::uint64_t> expired;
    for (const auto& [key, call] : calls_)
        if (now >= call->deadline) expired.push_back(key);
    for (const auto key : expired)
        finish(key, ToolResult::error(closing_ ? "abandoned: the MCP client closed its input"
                                               : "ptyvisord did not answer in time"));
}

void DaemonRunner::service(ToolCall& call, short revents) {
    std::string why;
    if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        std::vector<client::Event> events;
        if (!call.connection.read_events(events, why))
            return finish(call.key, ToolResult::error("connection to ptyvisord failed: " + why));
        for (auto& event : events) {
            if (call.tool->on_event) call.tool->on_event(call, event);
            call.record(event);
        }
    }
    call.connection.flush();
    const bool done_early = call.tool->done_early && call.tool->done_early(call);
    if (call.connection.finished() && !call.said.error && !call.said.violation && call.tool->next) {
        why.clear();
        if (call.tool->next(call, why)) {
            call.connection.flush();
            return;
        }
        if (!why.empty()) return finish(call.key, ToolResult::error(why));
    }
    if (call.connection.finished() || done_early || call.said.error) finish(call.key, result_of(call));
}

void DaemonRunner::finish(std::uint64_t key, const ToolResult& result) {
    const auto it = calls_.find(key);
    if (it == calls_.end()) return;
    calls_.erase(it);  // closes the connection before the answer goes out
    complete_(key, result);
}

ToolResult DaemonRunner::result_of(ToolCall& call) {
    const auto& s = call.said;
    if (s.error) return call.tool->refused ? call.tool->refused(call) : ToolResult::error(error_text(*s.error));
    if (s.violation) return ToolResult::error("protocol error from ptyvisord: " + *s.violation);
    return call.tool->result(call);
}

}  // namespace ptyvisor::cli::mcp
