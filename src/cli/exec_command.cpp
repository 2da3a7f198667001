#include "cli/exec_command.h"

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string_view>

#include "cli/options.h"
#include "cli/relay.h"
#include "cli/session_commands.h"
#include "cli/table.h"
#include "client/client.h"

namespace ptyvisor::cli {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using Outcome = protocol::ExecReply::Outcome;

// COMMANDS and READ are answered at once: this bounds a daemon that has hung.
constexpr milliseconds kReplyTimeout{60'000};
// EXEC answers within its timeout, plus the Ctrl-C grace with --interrupt: this much more
// before we call the daemon hung.
constexpr milliseconds kExecMargin{30'000};
// The bytes one READ asks for: the daemon holds them in memory while it sends them.
constexpr std::uint64_t kReadChunk = 4 * 1024 * 1024;

int failure(const std::string& why) {
    std::cerr << "ptyvisor: " << why << '\n' << std::flush;
    return kFailure;
}

std::string socket_path(const std::optional<std::string>& flag) {
    return resolve_socket_path(flag, std::getenv(client::kSocketEnvironmentVariable));
}

// The daemon's refusal of a version 4 request, for a person.
std::string refusal_text(const protocol::ErrorReply& e, const std::string& id) {
    using protocol::ErrorCode;
    switch (e.code) {
        case ErrorCode::NoShellIntegration:
            return "session " + id + " does not report its commands: start its shell with "
                   "`ptyvisor run --detach --shell-integration -- bash` (or zsh) (no_shell_integration)";
        case ErrorCode::Busy: return "another exec is running in session " + id + " (busy)";
        case ErrorCode::SessionEnded: return "session " + id + " has ended (session_ended)";
        case ErrorCode::UnsupportedVersion:
            return "the daemon does not offer command-aware sessions: it is older than protocol version 4 "
                   "(unsupported_version)";
        default: break;
    }
    return e.message + " (" + std::string(protocol::to_string(e.code)) + ")";
}

// One request on a new connection and everything the daemon answered, into `t`. False with
// `why` when it could not be had, or the daemon refused it or broke the protocol.
bool exchange(const std::optional<std::string>& socket, const std::string& id,
              const std::function<bool(client::Connection&, std::string&)>& queue, milliseconds timeout,
              client::Transcript& t, std::string& why) {
    client::Connection connection;
    if (!connection.connect(socket_path(socket), why) || !queue(connection, why)) return false;
    if (!client::run_to_completion(connection, timeout, t, why)) return false;
    if (t.error) return why = refusal_text(*t.error, id), false;
    if (t.violation) return why = "protocol error from the daemon: " + *t.violation, false;
    return true;
}

// The log's bytes [from, to) of session `id`, READ after READ, each piece to `sink` as it
// comes; `first` is where they began (past `from` when the log had already dropped the
// start). False with `why`.
bool read_range(const std::optional<std::string>& socket, const std::string& id, std::uint64_t from,
                std::uint64_t to, const std::function<bool(std::string_view, std::string&)>& sink,
                std::uint64_t& first, std::string& why) {
    first = from;
    bool begun = false;
    while (from < to) {
        client::Connection connection;
        if (!connection.connect(socket_path(socket), why)) return false;
        const protocol::ReadRequest request{id, {protocol::LogPosition::Kind::Offset, from}, std::min(to - from, kReadChunk)};
        if (!connection.queue_read(request, why)) return false;
        const auto deadline = Clock::now() + kReplyTimeout;
        std::optional<protocol::LogReply> log;
        std::uint64_t received = 0;
        std::vector<client::Event> events;
        while (!connection.finished()) {
            const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
            if (left.count() <= 0) return why = "the daemon did not send the command's output within 60 s", false;
            if (!client::wait_for_events(connection, left, events, why)) return false;
            for (auto& event : events) {
                if (auto* l = std::get_if<client::Log>(&event)) {
                    log = l->reply;
                } else if (auto* o = std::get_if<client::Output>(&event)) {
                    received += o->bytes.size();
                    if (!sink(std::string_view(reinterpret_cast<const char*>(o->bytes.data()), o->bytes.size()), why))
                        return false;
                } else if (auto* e = std::get_if<client::Error>(&event)) {
                    return why = refusal_text(e->reply, id), false;
                } else if (auto* v = std::get_if<client::ProtocolViolation>(&event)) {
                    return why = "protocol error from the daemon: " + v->message, false;
                }
            }
        }
        if (!log || received != log->length) return why = "connection to the daemon lost while reading the output", false;
        if (!begun) first = std::max(from, log->offset);
        begun = true;
        if (log->length == 0) break;  // the log ends before `to`: nothing more to have
        from = log->offset + log->length;
    }
    return true;
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

std::string shorten(std::string_view text, std::size_t most) {
    if (text.size() <= most) return std::string(text);
    return std::string(text.substr(0, most - 3)) + "...";
}

}  // namespace

// --- pure parts ----------------------------------------------------------------------------

int exec_status(const protocol::ExecReply& reply, std::string& message) {
    message.clear();
    const std::string seq = reply.command ? std::to_string(reply.command->seq) : "";
    switch (reply.state) {
        case Outcome::Exited:
        case Outcome::Interrupted:
            if (reply.exit_code) return *reply.exit_code;
            message = "ptyvisor: the command ended, but its shell did not report its status";
            return kFailure;
        case Outcome::Timeout:
            message = reply.command
                          ? "ptyvisor: timed out; command " + seq + " still runs (wait for it: ptyvisor wait --for command --after " +
                                std::to_string(reply.command->seq - 1) + " " + reply.id + ")"
                          : "ptyvisor: timed out before the shell was at its prompt; the command was not run";
            return kTimedOut;
        case Outcome::WaitingForInput:
            message = "ptyvisor: command " + seq + " waits for input; it still runs. Answer it with `ptyvisor send " +
                      reply.id + " TEXT` (or --keys ...), then wait for it with `ptyvisor wait --for command --after " +
                      (reply.command ? std::to_string(reply.command->seq - 1) : std::string("SEQ-1")) + " " +
                      reply.id + "`";
            return kWaitingForInput;
        case Outcome::SessionEnded:
            message = "ptyvisor: the session ended before the command did";
            return kFailure;
    }
    return kFailure;
}

std::string exec_json(const protocol::ExecReply& reply, const std::string& output, bool truncated) {
    nlohmann::json j = nlohmann::json::object();
    j["exit_code"] = reply.exit_code ? nlohmann::json(*reply.exit_code) : nlohmann::json(nullptr);
    switch (reply.state) {
        case Outcome::Exited: j["state"] = "exited"; break;
        case Outcome::Interrupted:
            j["state"] = "exited";
            j["interrupted"] = true;
            break;
        case Outcome::SessionEnded:
            j["state"] = "exited";
            j["exit_code"] = nullptr;
            j["session_ended"] = true;
            break;
        case Outcome::Timeout: j["state"] = "timeout"; break;
        case Outcome::WaitingForInput: j["state"] = "waiting_for_input"; break;
    }
    j["output"] = output;
    j["truncated"] = truncated;
    j["seq"] = reply.command ? nlohmann::json(reply.command->seq) : nlohmann::json(nullptr);
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string format_duration(std::int64_t ms) {
    if (ms < 0) ms = 0;
    const auto two = [](std::int64_t n) { return (n < 10 ? "0" : "") + std::to_string(n); };
    if (ms < 1000) return std::to_string(ms) + "ms";
    if (ms < 60'000) return std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + "s";
    if (ms < 3'600'000) return std::to_string(ms / 60'000) + "m" + two(ms / 1000 % 60) + "s";
    return std::to_string(ms / 3'600'000) + "h" + two(ms / 60'000 % 60) + "m";
}

std::string format_commands(const protocol::CommandListReply& list) {
    std::vector<std::vector<std::string>> rows{{"SEQ", "EXIT", "DURATION", "CWD", "COMMAND"}};
    const auto row = [&](const protocol::CommandRecord& r, bool running) {
        const std::string exit = running ? "running" : r.exit_code ? std::to_string(*r.exit_code) : "?";
        const std::string duration = r.ended_ms ? format_duration(*r.ended_ms - r.started_ms) : "-";
        rows.push_back({std::to_string(r.seq), exit, duration, r.cwd.empty() ? "-" : shorten(r.cwd, 40),
                        shorten(r.command, 120)});
    };
    for (const auto& r : list.commands) row(r, false);
    if (list.current) row(*list.current, true);
    return format_table(rows);
}

// --- exec ----------------------------------------------------------------------------------

int exec_command(const ExecOptions& options) {
    std::string why;
    if (!check_session_id(options.id, why)) return failure(why);
    protocol::ExecRequest request;
    request.id = options.id;
    request.interrupt = options.interrupt;
    request.timeout_ms = protocol::kMaxWaitMs;
    if (options.timeout && !parse_timeout_seconds(*options.timeout, request.timeout_ms, why)) return failure(why);
    if (request.timeout_ms == 0) request.timeout_ms = 1;
    // The words after the id are the command's, "--" included (positionals_at_end): the
    // "--" the contract writes before them is ours to drop.
    auto words = options.command;
    if (!words.empty() && words.front() == "--") words.erase(words.begin());
    if (!exec_line(words, request.command, why)) return failure(why);

    client::Transcript t;
    const auto queue = [&](client::Connection& c, std::string& w) { return c.queue_exec(request, w); };
    const auto limit = milliseconds(request.timeout_ms) + milliseconds(protocol::kExecInterruptGraceMs) + kExecMargin;
    if (!exchange(options.socket, options.id, queue, limit, t, why)) return failure(why);
    if (!t.executed) return failure("connection to the daemon lost");
    const auto& reply = *t.executed;

    // The output: the record's range, or up to the log's end at the reply while it runs.
    std::string output;
    bool truncated = false;
    if (reply.command) {
        const auto& r = *reply.command;
        const std::uint64_t end = r.output_end.value_or(std::max(reply.offset, r.output_start));
        std::uint64_t first = r.output_start;
        // Plain: the bytes as the program wrote them through the terminal, "\r\n" line ends
        // and escape sequences included, also into a pipe. Turning "\r\n" into "\n" would
        // corrupt what is not text, and a lone "\r" (a progress line) means something; a
        // reader that wants lines normalises, as the tests do.
        const auto sink = [&](std::string_view piece, std::string& w) {
            if (!options.json) return write_all(STDOUT_FILENO, piece, w);
            const std::uint64_t room = kMaxJsonOutput - std::min<std::uint64_t>(output.size(), kMaxJsonOutput);
            if (piece.size() > room) truncated = true;
            output.append(piece.substr(0, room));
            return true;
        };
        if (!read_range(options.socket, options.id, r.output_start, end, sink, first, why)) return failure(why);
        if (first > r.output_start) {
            truncated = true;
            if (!options.json)
                std::cerr << "ptyvisor: the session's log had already dropped the first " << (first - r.output_start)
                          << " bytes of the command's output\n";
        }
    }
    if (options.json) {
        std::cout << exec_json(reply, output, truncated) << '\n' << std::flush;
        if (!std::cout) return kFailure;
        return 0;
    }
    std::string message;
    const int code = exec_status(reply, message);
    if (!message.empty()) std::cerr << message << '\n' << std::flush;
    return code;
}

// --- commands ------------------------------------------------------------------------------

int commands_command(const CommandsOptions& options) {
    std::string why;
    if (!check_session_id(options.id, why)) return failure(why);
    protocol::CommandsRequest request{options.id, 0};
    if (options.since && !parse_command_seq(*options.since, request.since, why))
        return failure("--since: " + why.substr(why.find("expects")));
    client::Transcript t;
    const auto queue = [&](client::Connection& c, std::string& w) { return c.queue_commands(request, w); };
    if (!exchange(options.socket, options.id, queue, kReplyTimeout, t, why)) return failure(why);
    if (!t.command_list) return failure("connection to the daemon lost");
    if (options.json)
        std::cout << nlohmann::json::parse(protocol::encode(*t.command_list)).dump(2, ' ', false,
                                                                                 nlohmann::json::error_handler_t::replace)
                  << '\n';
    else
        std::cout << format_commands(*t.command_list);
    std::cout.flush();
    return std::cout ? 0 : kFailure;
}

}  // namespace ptyvisor::cli
