#include "cli/mcp/daemon_runner.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <exception>
#include <type_traits>

#include "cli/mcp/screen_view.h"
#include "cli/options.h"
#include "client/client.h"

namespace ptyvisor::cli::mcp {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using std::chrono::milliseconds;

// The daemon answers LIST, READ, SEND, START and a signal's KILL at once: this bounds one
// that hangs.
constexpr milliseconds kReplyTimeout{20'000};
// KILL without a signal answers once the session has ended: within the daemon's cleanup
// bound (15 s by default).
constexpr milliseconds kKillTimeout{45'000};
// What WAIT gets beyond its own timeout before we call the daemon hung.
constexpr milliseconds kWaitMargin{15'000};
// How many sessions' read cursors we keep.
constexpr std::size_t kMaxCursors = 256;

std::string error_text(const protocol::ErrorReply& e) {
    return "ptyvisord refused: " + e.message + " (" + std::string(protocol::to_string(e.code)) + ")";
}

json exit_json(const std::optional<protocol::ExitStatus>& exit) {
    if (!exit) return nullptr;
    json j = json::object();
    switch (exit->kind) {
        case protocol::ExitStatus::Kind::Exited:
            j["status"] = "exited";
            j["code"] = exit->code;
            break;
        case protocol::ExitStatus::Kind::Signaled: {
            j["status"] = "signaled";
            j["signal"] = exit->signal;
            const char* name = ::sigabbrev_np(exit->signal);
            if (name != nullptr) j["signal_name"] = std::string("SIG") + name;
            j["core_dumped"] = exit->core_dumped;
            break;
        }
        case protocol::ExitStatus::Kind::Unknown:
            j["status"] = "unknown";
            break;
    }
    j["shell_status"] = exit->shell_status();
    j["reason"] = std::string(protocol::to_string(exit->reason));
    return j;
}

std::string state_name(protocol::State s) { return std::string(protocol::to_string(s)); }

}  // namespace

// One tool call in flight: its connection and what the daemon has said so far.
struct DaemonRunner::Call {
    std::uint64_t key = 0;
    ToolArgs args;
    client::Connection connection;
    Clock::time_point deadline;
    client::Transcript said;
    std::uint64_t read_from = 0;  // terminal_read: the offset asked for
    ParseState read_state = ParseState::Ground;

    void record(client::Event& event) {
        std::visit(
            [this](auto& e) {
                using T = std::decay_t<decltype(e)>;
                if constexpr (std::is_same_v<T, client::Started>)
                    said.started = std::move(e);
                else if constexpr (std::is_same_v<T, client::Output>)
                    said.output.append(e.bytes.begin(), e.bytes.end());
                else if constexpr (std::is_same_v<T, client::Exit>)
                    said.exit = std::move(e.status);
                else if constexpr (std::is_same_v<T, client::Error>)
                    said.error = std::move(e.reply);
                else if constexpr (std::is_same_v<T, client::Closed>)
                    said.closed = true;
                else if constexpr (std::is_same_v<T, client::ProtocolViolation>)
                    said.violation = std::move(e.message);
                else if constexpr (std::is_same_v<T, client::Attached>)
                    said.attached = std::move(e.reply);
                else if constexpr (std::is_same_v<T, client::Detached>)
                    said.detached = std::move(e.reply);
                else if constexpr (std::is_same_v<T, client::Sessions>)
                    said.sessions = std::move(e.sessions);
                else if constexpr (std::is_same_v<T, client::Log>)
                    said.log = std::move(e.reply);
                else if constexpr (std::is_same_v<T, client::Waited>)
                    said.waited = std::move(e.reply);
                else if constexpr (std::is_same_v<T, client::Killed>)
                    said.killed = std::move(e.reply);
                else if constexpr (std::is_same_v<T, client::Sent>)
                    said.sent = e.reply;
                else if constexpr (std::is_same_v<T, client::Screen>)
                    said.screen = std::move(e);
            },
            event);
    }

    // Whether the call has what it came for before the connection closes: a detached
    // START's STARTED (we then let go of the session), or a resize's DETACHED.
    [[nodiscard]] bool done_early() const {
        return (std::holds_alternative<StartArgs>(args) && said.started) ||
               (std::holds_alternative<ResizeArgs>(args) && said.detached);
    }
};

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
    auto call = std::make_unique<Call>();
    call->key = key;
    call->args = args;
    call->deadline = Clock::now() + kReplyTimeout;
    std::string why;
    if (!call->connection.connect(socket_path_, why))
        return complete_(key, ToolResult::error("cannot reach ptyvisord: " + why));
    auto& c = call->connection;
    bool queued = true;
    if (const auto* a = std::get_if<StartArgs>(&args)) {
        client::StartOptions options;
        options.argv = a->argv;
        queued = build_environment(current_environment(), false, a->env_settings, options.env, why);
        options.term = a->term;
        options.size = a->size;
        if (a->cwd) options.cwd = *a->cwd;
        options.detach = true;
        queued = queued && c.start(options, why);
    } else if (const auto* w = std::get_if<WriteArgs>(&args)) {
        queued = c.queue_send(w->id, std::span(reinterpret_cast<const std::uint8_t*>(w->bytes.data()), w->bytes.size()),
                              why);
    } else if (const auto* r = std::get_if<ReadArgs>(&args)) {
        // Offset 0, not "start": a log that has already let go of its beginning then shows
        // in dropped_bytes.
        protocol::LogPosition from{protocol::LogPosition::Kind::Offset, 0};
        const auto cursor = cursors_.find(r->id);
        if (r->offset) {
            from = {protocol::LogPosition::Kind::Offset, *r->offset};
        } else if (cursor != cursors_.end()) {
            from = {protocol::LogPosition::Kind::Offset, cursor->second.offset};
        }
        call->read_from = from.offset;
        // The parser's state carries over only when this read begins where the last stopped.
        if (cursor != cursors_.end() && cursor->second.offset == from.offset) call->read_state = cursor->second.state;
        queued = c.queue_read({r->id, from, r->max_bytes}, why);
    } else if (const auto* wait = std::get_if<WaitArgs>(&args)) {
        call->deadline = Clock::now() + milliseconds(wait->request.timeout_ms) + kWaitMargin;
        queued = c.queue_wait(wait->request, why);
    } else if (std::holds_alternative<ListArgs>(args)) {
        c.queue_list();
    } else if (const auto* k = std::get_if<KillArgs>(&args)) {
        if (k->signal == 0) call->deadline = Clock::now() + kKillTimeout;
        queued = c.queue_kill({k->id, k->signal}, why);
    } else if (const auto* screen = std::get_if<ScreenArgs>(&args)) {
        // The request `ptyvisor screen` sends; the daemon answers within its worker's 5 s.
        queued = c.queue_snapshot({screen->id, screen->scrollback, screen->attributes}, why);
    } else if (const auto* z = std::get_if<ResizeArgs>(&args)) {
        // Only a controller may resize: attach as one for as long as it takes, then detach.
        queued = c.attach({z->id, {protocol::LogPosition::Kind::Tail, 0}, /*observe=*/false, /*takeover=*/false}, why);
    }
    if (!queued) return complete_(key, ToolResult::error(why));
    c.flush();
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

void DaemonRunner::service(Call& call, short revents) {
    std::string why;
    if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        std::vector<client::Event> events;
        if (!call.connection.read_events(events, why))
            return finish(call.key, ToolResult::error("connection to ptyvisord failed: " + why));
        for (auto& event : events) {
            call.record(event);
            if (std::holds_alternative<client::Attached>(event)) {
                const auto& z = std::get<ResizeArgs>(call.args);
                call.connection.queue_resize(z.size);
                call.connection.queue_detach();
            }
        }
    }
    call.connection.flush();
    if (call.connection.finished() || call.done_early() || call.said.error) finish(call.key, result_of(call));
}

void DaemonRunner::finish(std::uint64_t key, const ToolResult& result) {
    const auto it = calls_.find(key);
    if (it == calls_.end()) return;
    calls_.erase(it);  // closes the connection before the answer goes out
    complete_(key, result);
}

ToolResult DaemonRunner::result_of(Call& call) {
    const auto& s = call.said;
    if (s.error && s.error->code == protocol::ErrorCode::Busy && std::holds_alternative<ResizeArgs>(call.args))
        return ToolResult::error(
            "cannot resize: a client is attached to this session as its controller (someone runs "
            "`ptyvisor attach` on it), and the terminal's size is that client's; " +
            error_text(*s.error));
    if (s.error && std::holds_alternative<ScreenArgs>(call.args)) return screen_result(call);
    if (s.error) return ToolResult::error(error_text(*s.error));
    if (s.violation) return ToolResult::error("protocol error from ptyvisord: " + *s.violation);
    if (const auto* a = std::get_if<StartArgs>(&call.args)) {
        if (!s.started) return ToolResult::error("ptyvisord closed the connection before the session started");
        return ToolResult::ok({{"id", s.started->id}, {"argv", a->argv}});
    }
    if (const auto* w = std::get_if<WriteArgs>(&call.args)) {
        if (!s.sent) return ToolResult::error("connection to ptyvisord lost");
        return ToolResult::ok({{"id", w->id}, {"bytes", s.sent->bytes}});
    }
    if (std::holds_alternative<ReadArgs>(call.args)) return read_result(call);
    if (std::holds_alternative<ScreenArgs>(call.args)) return screen_result(call);
    if (std::holds_alternative<WaitArgs>(call.args)) {
        if (!s.waited) return ToolResult::error("connection to ptyvisord lost");
        const auto& w = *s.waited;
        json j = {{"reason", w.reason},
                  {"matched", w.matched},
                  {"offset", w.offset},
                  {"state", state_name(w.state)},
                  {"exit", exit_json(w.exit)}};
        if (w.reason == "text") {
            j["match_start"] = w.match_start;
            j["match_end"] = w.match_end;
        }
        return ToolResult::ok(std::move(j));
    }
    if (std::holds_alternative<ListArgs>(call.args)) {
        if (!s.sessions) return ToolResult::error("connection to ptyvisord lost");
        json sessions = json::array();
        for (const auto& i : *s.sessions)
            sessions.push_back({{"id", i.id},
                                {"argv", i.argv},
                                {"state", state_name(i.state)},
                                {"exit", exit_json(i.exit)},
                                {"cwd", i.cwd},
                                {"offset", i.offset},
                                {"clients", i.clients},
                                {"created", i.created},
                                {"detached", i.detached}});
        return ToolResult::ok({{"sessions", std::move(sessions)}});
    }
    if (std::holds_alternative<KillArgs>(call.args)) {
        if (!s.killed) return ToolResult::error("connection to ptyvisord lost");
        return ToolResult::ok(
            {{"id", s.killed->id}, {"state", state_name(s.killed->state)}, {"exit", exit_json(s.killed->exit)}});
    }
    if (const auto* z = std::get_if<ResizeArgs>(&call.args)) {
        if (s.detached) return ToolResult::ok({{"id", z->id}, {"cols", z->size.cols}, {"rows", z->size.rows}});
        if (s.exit || (s.attached && s.attached->state == protocol::State::Exited))
            return ToolResult::error("the session has exited: there is no terminal to resize");
        return ToolResult::error("connection to ptyvisord lost");
    }
    return ToolResult::error("internal error: no result");
}

ToolResult DaemonRunner::read_result(Call& call) {
    const auto& r = std::get<ReadArgs>(call.args);
    const auto& s = call.said;
    if (!s.log || s.output.size() != s.log->length)
        return ToolResult::error("connection to ptyvisord lost while reading");
    const auto& log = *s.log;
    const bool more = log.offset + log.length < log.end;
    // Nothing will follow these bytes: hold nothing back.
    const bool final = log.state == protocol::State::Exited && !more;
    const ParseState state = log.offset == call.read_from ? call.read_state : ParseState::Ground;
    auto text = r.strip_ansi ? strip_terminal_output(s.output, state, final) : raw_terminal_output(s.output, final);
    if (text.consumed == 0 && !s.output.empty() && more) {
        // A sequence longer than max_bytes: take it as it is rather than never move on.
        text = r.strip_ansi ? strip_terminal_output(s.output, state, true) : raw_terminal_output(s.output, true);
    }
    const std::uint64_t next = log.offset + text.consumed;
    remember_cursor(r.id, next, text.state);
    const std::uint64_t dropped = log.offset > call.read_from ? log.offset - call.read_from : 0;
    return ToolResult::ok({{"id", r.id},
                           {"text", std::move(text.text)},
                           {"offset", log.offset},
                           {"next_offset", next},
                           {"end", log.end},
                           {"more", more},
                           {"dropped_bytes", dropped},
                           {"state", state_name(log.state)},
                           {"exit", exit_json(log.exit)}});
}

ToolResult DaemonRunner::screen_result(const Call& call) {
    const auto& s = call.said;
    if (s.error) {
        switch (s.error->code) {
            case protocol::ErrorCode::UnsupportedVersion:
                // A daemon older than protocol version 3.
                return ToolResult::error(
                    "this ptyvisord does not offer screen snapshots (it predates protocol "
                    "version 3): use terminal_read instead; " +
                    error_text(*s.error));
            case protocol::ErrorCode::Internal:
                // The screen worker is restarting or slow; a restarted one rebuilds every screen.
                return ToolResult::error(
                    "the screen is not available right now (ptyvisord's screen worker may be "
                    "restarting): call terminal_screen again in a moment, or use "
                    "terminal_read; " +
                    error_text(*s.error));
            default:
                return ToolResult::error(error_text(*s.error));
        }
    }
    if (!s.screen) return ToolResult::error("connection to ptyvisord lost before the screen arrived");
    return ToolResult::ok(screen_view_json(s.screen->screen), screen_view_text(s.screen->screen));
}

void DaemonRunner::remember_cursor(const std::string& id, std::uint64_t offset, ParseState state) {
    cursors_[id] = {offset, state, ++cursor_clock_};
    if (cursors_.size() <= kMaxCursors) return;
    const auto oldest = std::min_element(cursors_.begin(), cursors_.end(), [](const auto& a, const auto& b) {
        return a.second.last_used < b.second.last_used;
    });
    cursors_.erase(oldest);
}

}  // namespace ptyvisor::cli::mcp
