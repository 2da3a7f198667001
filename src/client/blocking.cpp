#include "client/blocking.h"

#include <poll.h>

#include <cerrno>
#include <type_traits>

#include "client/client_error.h"

namespace ptyvisor::client {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

void record(Event& event, Transcript& t) {
    std::visit(
        [&t](auto& e) {
            using T = std::decay_t<decltype(e)>;
            if constexpr (std::is_same_v<T, Started>) t.started = std::move(e);
            else if constexpr (std::is_same_v<T, Output>) t.output.append(e.bytes.begin(), e.bytes.end());
            else if constexpr (std::is_same_v<T, Exit>) t.exit = std::move(e.status);
            else if constexpr (std::is_same_v<T, Error>) t.error = std::move(e.reply);
            else if constexpr (std::is_same_v<T, Status>) t.status = std::move(e);
            else if constexpr (std::is_same_v<T, Closed>) t.closed = true;
            else if constexpr (std::is_same_v<T, ProtocolViolation>) t.violation = std::move(e.message);
            else if constexpr (std::is_same_v<T, Attached>) t.attached = std::move(e.reply);
            else if constexpr (std::is_same_v<T, Detached>) t.detached = std::move(e.reply);
            else if constexpr (std::is_same_v<T, Dropped>) t.dropped.push_back(e.notice);
            else if constexpr (std::is_same_v<T, Sessions>) t.sessions = std::move(e.sessions);
            else if constexpr (std::is_same_v<T, Log>) t.log = std::move(e.reply);
            else if constexpr (std::is_same_v<T, Waited>) t.waited = std::move(e.reply);
            else if constexpr (std::is_same_v<T, Killed>) t.killed = std::move(e.reply);
            else if constexpr (std::is_same_v<T, Sent>) t.sent = e.reply;
            else if constexpr (std::is_same_v<T, Screen>) t.screen = e;
            else if constexpr (std::is_same_v<T, Executed>) t.executed = std::move(e.reply);
            else if constexpr (std::is_same_v<T, CommandList>) t.command_list = std::move(e.reply);
        },
        event);
}

}  // namespace

bool wait_for_events(Connection& connection, std::chrono::milliseconds timeout, std::vector<Event>& events,
                     std::string& why) {
    events.clear();
    const auto deadline = Clock::now() + timeout;
    while (!connection.finished()) {
        const bool drained = connection.flush();
        pollfd p{connection.fd(), static_cast<short>(POLLIN | (drained ? 0 : POLLOUT)), 0};
        const int n = ::poll(&p, 1, remaining_ms(deadline));
        if (n < 0) {
            if (errno == EINTR) continue;
            why = errno_message("poll", errno);
            return false;
        }
        if (n == 0) return true;
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
            if (!connection.read_events(events, why)) return false;
            if (!events.empty()) return true;
        }
    }
    return true;
}

bool run_to_completion(Connection& connection, std::chrono::milliseconds timeout, Transcript& out, std::string& why) {
    const auto deadline = Clock::now() + timeout;
    out = Transcript{};
    std::vector<Event> events;
    while (!connection.finished()) {
        if (Clock::now() >= deadline) {
            why = "the daemon did not finish within " + std::to_string(timeout.count()) + " ms";
            return false;
        }
        if (!wait_for_events(connection, std::chrono::milliseconds(remaining_ms(deadline)), events, why)) return false;
        for (auto& e : events) record(e, out);
    }
    return true;
}

}  // namespace ptyvisor::client
