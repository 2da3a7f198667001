#include "cli/session_commands.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/options.h"
#include "cli/relay.h"
#include "cli/send_keys.h"
#include "cli/table.h"
#include "cli/terminal_mode.h"
#include "client/client.h"

namespace ptyvisor::cli {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The daemon answers LIST, SEND and a signal's KILL at once, and READ as fast as we read:
// these bound a daemon that has hung.
constexpr milliseconds kReplyTimeout{60'000};
// KILL without a signal answers once the session has ended: the daemon's cleanup bound
// (15 s by default) and then some.
constexpr milliseconds kKillTimeout{120'000};
// Extra time we give WAIT beyond its own timeout before we call the daemon hung.
constexpr milliseconds kWaitMargin{30'000};
// The bytes one READ asks for: the daemon holds them in memory while it sends them.
constexpr std::uint64_t kReadChunk = 4 * 1024 * 1024;

int failure(const std::string& why) {
    std::cerr << "ptyvisor: " << why << '\n' << std::flush;
    return kFailure;
}

std::string error_text(const protocol::ErrorReply& e) {
    return e.message + " (" + std::string(protocol::to_string(e.code)) + ")";
}

std::string socket_path(const std::optional<std::string>& flag) {
    return resolve_socket_path(flag, std::getenv(client::kSocketEnvironmentVariable));
}

// One request on a new connection, queued by `queue`, and everything the daemon answered,
// into `t`. False with `why` when it could not be had, or the daemon refused it (ERROR) or
// broke the protocol.
bool exchange(const std::optional<std::string>& socket,
              const std::function<bool(client::Connection&, std::string&)>& queue, milliseconds timeout,
              client::Transcript& t, std::string& why) {
    client::Connection connection;
    if (!connection.connect(socket_path(socket), why) || !queue(connection, why)) return false;
    if (!client::run_to_completion(connection, timeout, t, why)) return false;
    if (t.error) return why = error_text(*t.error), false;
    if (t.violation) return why = "protocol error from the daemon: " + *t.violation, false;
    return true;
}

bool needs_quoting(const std::string& arg) {
    if (arg.empty()) return true;
    for (const char c : arg) {
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                           std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
        if (!plain) return true;
    }
    return false;
}

// argv as a shell would take it back: arguments that need it in single quotes.
std::string command_line(const std::vector<std::string>& argv) {
    std::string line;
    for (const auto& arg : argv) {
        if (!line.empty()) line += ' ';
        if (!needs_quoting(arg)) {
            line += arg;
            continue;
        }
        line += '\'';
        for (const char c : arg) {
            if (c == '\'')
                line += "'\\''";
            else
                line += c;
        }
        line += '\'';
    }
    return line;
}

std::string_view state_name(protocol::State state) {
    return state == protocol::State::Exited ? "exited" : "running";  // "starting" is running to a person
}

// The table's STATE: "input" for a program that waits for input on its terminal (a shell at
// its prompt waits too, but is no news), else running or exited.
std::string_view state_column(const protocol::SessionInfo& s) {
    if (s.state != protocol::State::Exited && s.waiting_for_input && !s.at_prompt) return "input";
    return state_name(s.state);
}

std::string exit_column(const protocol::SessionInfo& s) {
    if (!s.exit) return "-";
    switch (s.exit->kind) {
        case protocol::ExitStatus::Kind::Exited: return std::to_string(s.exit->code);
        case protocol::ExitStatus::Kind::Signaled: {
            const char* name = ::sigabbrev_np(s.exit->signal);
            std::string text = name != nullptr ? std::string("SIG") + name : "signal " + std::to_string(s.exit->signal);
            return s.exit->core_dumped ? text + " (core)" : text;
        }
        case protocol::ExitStatus::Kind::Unknown: break;
    }
    return "?";
}

nlohmann::json exit_json(const std::optional<protocol::ExitStatus>& exit) {
    if (!exit) return nullptr;
    nlohmann::json j = nlohmann::json::object();
    switch (exit->kind) {
        case protocol::ExitStatus::Kind::Exited:
            j["status"] = "exited";
            j["code"] = exit->code;
            break;
        case protocol::ExitStatus::Kind::Signaled:
            j["status"] = "signaled";
            j["signal"] = exit->signal;
            j["core"] = exit->core_dumped;
            break;
        case protocol::ExitStatus::Kind::Unknown: j["status"] = "unknown"; break;
    }
    j["reason"] = std::string(protocol::to_string(exit->reason));
    if (!exit->unit_result.empty()) j["unit_result"] = exit->unit_result;
    return j;
}

nlohmann::json last_command_json(const std::optional<protocol::CommandRecord>& r) {
    if (!r) return nullptr;
    return {{"seq", r->seq},
            {"command", r->command},
            {"exit_code", r->exit_code ? nlohmann::json(*r->exit_code) : nlohmann::json(nullptr)},
            {"running", !r->ended()}};
}

bool write_all(int fd, std::string_view bytes, std::string& why) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n > 0) {
            bytes.remove_prefix(static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {  // a non-blocking stdout we inherited
            pollfd p{fd, POLLOUT, 0};
            if (::poll(&p, 1, -1) < 0 && errno != EINTR) return why = client::errno_message("poll", errno), false;
            continue;
        }
        why = client::errno_message("cannot write to stdout", n < 0 ? errno : EIO);
        return false;
    }
    return true;
}

}  // namespace

// --- pure parts ----------------------------------------------------------------------------

std::string format_age(std::int64_t seconds) {
    if (seconds < 0) seconds = 0;
    if (seconds < 60) return std::to_string(seconds) + "s";
    if (seconds < 3600) return std::to_string(seconds / 60) + "m";
    if (seconds < 86400) return std::to_string(seconds / 3600) + "h";
    return std::to_string(seconds / 86400) + "d";
}

std::string format_sessions(const std::vector<protocol::SessionInfo>& sessions, std::int64_t now) {
    std::vector<std::vector<std::string>> rows{{"ID", "STATE", "EXIT", "CLIENTS", "OFFSET", "AGE", "COMMAND"}};
    for (const auto& s : sessions)
        rows.push_back({s.id, std::string(state_column(s)), exit_column(s), std::to_string(s.clients),
                        std::to_string(s.offset), format_age(now - s.created), command_line(s.argv)});
    return format_table(rows);
}

// Who writes to the terminal: nobody once it has exited, else a person holding it or the agent.
nlohmann::json controller_json(const protocol::SessionInfo& s) {
    if (s.state == protocol::State::Exited) return nullptr;
    return s.held ? "supervisor" : "agent";
}

// SPEC's four members always (null where the daemon cannot tell: an older daemon, a host whose
// cgroups do not count it), then whatever else the daemon counted.
nlohmann::json usage_json(const std::optional<protocol::UsageInfo>& usage) {
    const protocol::UsageInfo u = usage.value_or(protocol::UsageInfo{});
    const auto value = [](const std::optional<std::uint64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    nlohmann::json j{{"cpu_usec", value(u.cpu_usec)},
                     {"memory_peak", value(u.memory_peak)},
                     {"tasks_peak", value(u.tasks_peak)},
                     {"oom_kills", value(u.oom_kills)}};
    for (const auto& [name, v] : {std::pair{"memory_current", u.memory_current}, std::pair{"tasks_current", u.tasks_current},
                                  std::pair{"tasks_limit_hits", u.tasks_limit_hits},
                                  std::pair{"io_read_bytes", u.io_read_bytes}, std::pair{"io_write_bytes", u.io_write_bytes}})
        if (v) j[name] = *v;
    return j;
}

std::string sessions_json(const std::vector<protocol::SessionInfo>& sessions) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& s : sessions) {
        array.push_back({{"id", s.id},
                         {"argv", s.argv},
                         {"state", state_name(s.state)},
                         {"exit", exit_json(s.exit)},
                         {"offset", s.offset},
                         {"start", s.start},
                         {"clients", s.clients},
                         {"created", s.created},
                         {"cwd", s.cwd},
                         {"detached", s.detached},
                         {"unit", s.unit},
                         {"pid", s.pid},
                         {"shell", s.shell ? nlohmann::json(*s.shell) : nlohmann::json(nullptr)},
                         {"at_prompt", s.at_prompt},
                         {"waiting_for_input", s.waiting_for_input},
                         {"last_command", last_command_json(s.last_command)},
                         {"controller", controller_json(s)},
                         {"controller_uid", s.held && s.controller_uid ? nlohmann::json(*s.controller_uid) : nlohmann::json(nullptr)},
                         {"controller_since", s.held && s.controller_since ? nlohmann::json(*s.controller_since) : nlohmann::json(nullptr)},
                         {"recording", s.recording},
                         {"profile", s.profile.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.profile)},
                         {"usage", usage_json(s.usage)}});
    }
    return array.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string send_payload(bool keys, const std::vector<std::string>& text) {
    if (keys) return keys_to_bytes(text);
    std::string joined;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (i > 0) joined += ' ';
        joined += text[i];
    }
    return joined;
}

int wait_status(const protocol::WaitReply& reply, protocol::WaitRequest::For what, std::string& message) {
    using For = protocol::WaitRequest::For;
    message.clear();
    if (reply.reason == "timeout") return kTimedOut;
    if (reply.reason == "exit") {
        if (reply.exit) return reply.exit->shell_status();
        message = "ptyvisor: the session ended, but the daemon did not say how";
        return kFailure;
    }
    if ((reply.reason == "quiet" && what == For::Quiet) || (reply.reason == "text" && what == For::Text) ||
        (reply.reason == "command" && what == For::Command) || (reply.reason == "prompt" && what == For::Prompt) ||
        (reply.reason == "input" && what == For::Input))
        return 0;
    if (reply.reason == "exited") {
        const char* before = what == For::Text      ? "the text appeared"
                             : what == For::Quiet   ? "its output went quiet"
                             : what == For::Command ? "the command ended"
                             : what == For::Prompt  ? "its shell was at its prompt"
                                                    : "it waited for input";
        message = std::string("ptyvisor: the session exited (status ") +
                  std::to_string(reply.exit ? reply.exit->shell_status() : kFailure) + ") before " + before;
        return 1;
    }
    if (reply.reason == "gone") {
        message = "ptyvisor: the session has gone";
        return kFailure;
    }
    message = "ptyvisor: unexpected WAITED reason '" + reply.reason + "'";
    return kFailure;
}

// --- ls ------------------------------------------------------------------------------------

int list_command(const ListOptions& options) {
    client::Transcript t;
    std::string why;
    // Version 6 first, whose entries say which limit ended a session (runtime-limit, ...);
    // a daemon older than that is asked again in the version it speaks.
    std::uint8_t version = 6;
    const auto queue = [&version](client::Connection& c, std::string&) {
        if (version) c.use_version(version);
        c.queue_list();
        return true;
    };
    if (!exchange(options.socket, queue, kReplyTimeout, t, why)) {
        if (!t.error || t.error->code != protocol::ErrorCode::UnsupportedVersion) return failure(why);
        version = 0;
        t = client::Transcript{};
        why.clear();
        if (!exchange(options.socket, queue, kReplyTimeout, t, why)) return failure(why);
    }
    if (!t.sessions) return failure("connection to the daemon lost");
    if (options.json)
        std::cout << sessions_json(*t.sessions) << '\n';
    else
        std::cout << format_sessions(*t.sessions, static_cast<std::int64_t>(std::time(nullptr)));
    std::cout.flush();
    return std::cout ? 0 : kFailure;
}

// --- send ----------------------------------------------------------------------------------

int send_command(const SendOptions& options) {
    std::string why;
    if (!check_session_id(options.id, why)) return failure(why);
    const std::string bytes = send_payload(options.keys, options.text);
    if (bytes.empty()) return failure("nothing to send");
    // One SEND carries at most one INPUT frame's worth; more goes in several, in order.
    for (std::size_t at = 0; at < bytes.size(); at += protocol::kMaxIoPayloadSize) {
        const auto piece = std::string_view(bytes).substr(at, protocol::kMaxIoPayloadSize);
        client::Transcript t;
        const auto queue = [&](client::Connection& c, std::string& w) {
            return c.queue_send(options.id,
                                std::span(reinterpret_cast<const std::uint8_t*>(piece.data()), piece.size()), w);
        };
        if (!exchange(options.socket, queue, kReplyTimeout, t, why)) return failure(why);
        if (!t.sent) return failure("connection to the daemon lost");
    }
    return 0;
}

// --- kill ----------------------------------------------------------------------------------

int kill_command(const KillOptions& options) {
    std::string why;
    if (!check_session_id(options.id, why)) return failure(why);
    protocol::KillRequest request{options.id, 0};
    if (options.signal && !parse_signal(*options.signal, request.signal, why)) return failure(why);
    client::Transcript t;
    const auto queue = [&](client::Connection& c, std::string& w) { return c.queue_kill(request, w); };
    if (!exchange(options.socket, queue, kKillTimeout, t, why)) return failure(why);
    if (!t.killed) return failure("connection to the daemon lost");
    return 0;
}

// --- wait ----------------------------------------------------------------------------------

namespace {

bool is_version4(protocol::WaitRequest::For what) {
    using For = protocol::WaitRequest::For;
    return what == For::Command || what == For::Prompt || what == For::Input;
}

}  // namespace

int wait_command(const WaitOptions& options) {
    std::string why;
    if (!check_session_id(options.id, why)) return failure(why);
    protocol::WaitRequest request;
    request.id = options.id;
    if (!parse_wait_condition(options.condition, request, why)) return failure(why);
    if (options.from) {
        if (request.what != protocol::WaitRequest::For::Text)
            return failure("--from applies to --for text:REGEX only");
        if (!parse_log_position(*options.from, request.from, why)) return failure(why);
    }
    if (options.after) {
        if (request.what != protocol::WaitRequest::For::Command) return failure("--after applies to --for command only");
        std::uint64_t after = 0;
        if (!parse_command_seq(*options.after, after, why)) return failure(why);
        request.after = after;
    }
    std::uint64_t timeout_ms = protocol::kMaxWaitMs;
    if (options.timeout && !parse_timeout_seconds(*options.timeout, timeout_ms, why)) return failure(why);
    // Without --timeout, as long as it takes: the daemon bounds one WAIT, so ask again.
    const bool forever = !options.timeout;
    for (;;) {
        request.timeout_ms = timeout_ms;
        client::Transcript t;
        const auto queue = [&](client::Connection& c, std::string& w) { return c.queue_wait(request, w); };
        if (!exchange(options.socket, queue, milliseconds(timeout_ms) + kWaitMargin, t, why)) {
            if (t.error && is_version4(request.what) &&
                (t.error->code == protocol::ErrorCode::UnsupportedVersion || t.error->code == protocol::ErrorCode::BadFrame))
                why += " (a daemon older than protocol version 4 does not offer --for " + options.condition + ")";
            return failure(why);
        }
        if (!t.waited) return failure("connection to the daemon lost");
        if (forever && t.waited->reason == "timeout") continue;
        if (t.waited->reason == "command" && t.waited->command)
            std::cout << protocol::encode(*t.waited->command) << '\n' << std::flush;
        std::string message;
        const int code = wait_status(*t.waited, request.what, message);
        if (!message.empty()) std::cerr << message << '\n' << std::flush;
        return code;
    }
}

// --- logs ----------------------------------------------------------------------------------

namespace {

// The offset a position names before the daemon resolves it, when it names one.
std::optional<std::uint64_t> requested_offset(const protocol::LogPosition& p) {
    switch (p.kind) {
        case protocol::LogPosition::Kind::Start: return 0;
        case protocol::LogPosition::Kind::Offset: return p.offset;
        case protocol::LogPosition::Kind::Tail: break;
    }
    return std::nullopt;
}

// One READ from `from`, its bytes written to stdout as they come; its LOG into `log`.
bool read_once(const LogsOptions& options, const protocol::LogPosition& from, protocol::LogReply& log,
               std::string& why) {
    client::Connection connection;
    if (!connection.connect(socket_path(options.socket), why)) return false;
    if (!connection.queue_read({options.id, from, kReadChunk}, why)) return false;
    const auto deadline = Clock::now() + kReplyTimeout;
    std::optional<protocol::LogReply> reply;
    std::uint64_t received = 0;
    std::vector<client::Event> events;
    while (!connection.finished()) {
        const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return why = "the daemon did not send the log within 60 s", false;
        if (!client::wait_for_events(connection, left, events, why)) return false;
        for (auto& event : events) {
            if (auto* l = std::get_if<client::Log>(&event)) {
                reply = l->reply;
            } else if (auto* o = std::get_if<client::Output>(&event)) {
                received += o->bytes.size();
                if (!write_all(STDOUT_FILENO,
                               std::string_view(reinterpret_cast<const char*>(o->bytes.data()), o->bytes.size()), why))
                    return false;
            } else if (auto* e = std::get_if<client::Error>(&event)) {
                return why = error_text(e->reply), false;
            } else if (auto* v = std::get_if<client::ProtocolViolation>(&event)) {
                return why = "protocol error from the daemon: " + v->message, false;
            }
        }
    }
    if (!reply || received != reply->length)
        return why = "connection to the daemon lost while reading the log", false;
    log = *reply;
    return true;
}

int follow(const LogsOptions& options, const protocol::LogPosition& from) {
    std::string why;
    client::Connection connection;
    if (!connection.connect(socket_path(options.socket), why)) return failure(why);
    if (const int r = block_relayed_signals(); r < 0)
        return failure(client::errno_message("cannot block the signals the session relays", r));
    if (!connection.attach({options.id, from, /*observe=*/true, /*takeover=*/false}, why)) return failure(why);
    RelayOptions relay;
    relay.mode = RelayMode::Follow;
    relay.requested_offset = requested_offset(from);
    std::string message;
    const int code = relay_session(connection, relay, message);
    if (!message.empty()) std::cerr << message << '\n' << std::flush;
    return code;
}

}  // namespace

int logs_command(const LogsOptions& options) {
    std::string why;
    if (!check_session_id(options.id, why)) return failure(why);
    protocol::LogPosition from;
    if (!parse_log_position(options.from, from, why)) return failure(why);
    // Following is observing from that offset: the log up to now, then what comes, each byte
    // once, until the session's end.
    if (options.follow) return follow(options, from);

    const auto requested = requested_offset(from);
    std::optional<std::uint64_t> target;  // the log's end when we began: we read up to it
    std::uint64_t next = 0;
    for (;;) {
        protocol::LogReply log;
        if (!read_once(options, from, log, why)) return failure(why);
        if (!target) {
            if (requested && log.offset > *requested) std::cerr << dropped_before_note(log.offset) << '\n' << std::flush;
            target = log.end;
        } else if (log.offset > next) {
            std::cerr << "ptyvisor: output from offset " << next << " to " << log.offset
                      << " was dropped while it was being read\n"
                      << std::flush;
        }
        next = log.offset + log.length;
        if (log.length == 0 || next >= *target) return 0;
        from = {protocol::LogPosition::Kind::Offset, next};
    }
}

// --- attach --------------------------------------------------------------------------------

namespace {

int attach_session(const AttachOptions& options, std::string& message) {
    std::string why;
    const auto fail = [&](const std::string& w) {
        message = "ptyvisor: " + w;
        return kFailure;
    };
    if (!check_session_id(options.id, why)) return fail(why);
    protocol::AttachRequest request{options.id, {}, options.observe, options.takeover, ::isatty(STDIN_FILENO) == 1};
    if (!parse_log_position(options.from, request.from, why)) return fail(why);
    RelayOptions relay;
    relay.mode = options.observe ? RelayMode::Observe : RelayMode::Control;
    if (!parse_detach_keys(options.detach_keys, relay.detach_keys, why)) return fail(why);
    client::Connection connection;
    if (!connection.connect(socket_path(options.socket), why)) return fail(why);
    if (const int r = block_relayed_signals(); r < 0)
        return fail(client::errno_message("cannot block the signals the session relays", r));
    // Raw, as for run: keys reach the session as they are typed (and the detach keys are
    // seen as bytes), for an observer too, whose keys would otherwise echo over the screen.
    std::optional<RawMode> raw;
    if (const int r = RawMode::enter(STDIN_FILENO, raw); r < 0)
        return fail(client::errno_message("cannot set raw mode", r));
    if (!connection.attach(request, why)) return fail(why);
    relay.stdin_is_tty = raw.has_value();
    relay.socket = socket_path(options.socket);
    relay.reattach_grace = reattach_grace_from_environment();
    if (!options.observe)
        relay.winch_fd = ::isatty(STDIN_FILENO) ? STDIN_FILENO : ::isatty(STDOUT_FILENO) ? STDOUT_FILENO : -1;
    return relay_session(connection, relay, message);
}

}  // namespace

int attach_command(const AttachOptions& options) {
    std::string message;
    const int code = attach_session(options, message);  // the terminal is restored on return
    if (!message.empty()) std::cerr << message << '\n' << std::flush;
    return code;
}

}  // namespace ptyvisor::cli
