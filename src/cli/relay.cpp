#include "cli/relay.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <systemd/sd-event.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <type_traits>
#include <vector>

#include "cli/detach_keys.h"
#include "cli/output_sink.h"
#include "client/client.h"
#include "common/scheduling.h"

namespace ptyvisor::cli {
namespace {

constexpr std::size_t kStdinChunk = 64 * 1024;

struct EventUnref {
    void operator()(sd_event* e) const { sd_event_unref(e); }
};
struct SourceUnref {
    void operator()(sd_event_source* s) const { sd_event_source_disable_unref(s); }
};
using EventPtr = std::unique_ptr<sd_event, EventUnref>;
using SourcePtr = std::unique_ptr<sd_event_source, SourceUnref>;

// Session-ending results other than a plain exit deserve a note; "exit-code", "signal" and
// "core-dump" only restate the status we return.
bool notable_unit_result(const std::string& result) {
    return !result.empty() && result != "success" && result != "exit-code" && result != "signal" &&
           result != "core-dump";
}

std::string describe_end(const protocol::ExitStatus& status) {
    const bool odd_reason = status.reason != protocol::ExitReason::Exited;
    const bool odd_result = notable_unit_result(status.unit_result);
    if (!odd_reason && !odd_result && status.kind != protocol::ExitStatus::Kind::Unknown) return {};
    std::string text = "ptyvisor: session ended: " + std::string(protocol::to_string(status.reason));
    if (odd_result) text += " (unit result: " + status.unit_result + ")";
    return text;
}

// A line on stderr now, while the relay runs (stdout is ours; stderr is not the session's).
void note(const std::string& text) { std::cerr << text << '\n' << std::flush; }

// The event loop of one session: the socket, stdin, stdout and our signals.
class Relay {
public:
    Relay(client::Connection& connection, const RelayOptions& options)
        : connection_(&connection), options_(options), filter_(options.detach_keys), sink_(STDOUT_FILENO),
          stdout_is_tty_(::isatty(STDOUT_FILENO) == 1) {}

    // Runs until the session is over; returns our exit status. final_message() then holds
    // what to print on stderr (printed by the caller once the terminal is restored).
    int run() {
        sd_event* e = nullptr;
        if (const int r = sd_event_new(&e); r < 0) return failed(r, "create the event loop");
        loop_.reset(e);
        if (const int r = add_sources(); r < 0) return kFailure;  // add_sources() said which
        update();
        // The exit code given to sd_event_exit(), or a negative errno.
        const int r = sd_event_loop(loop_.get());
        if (r < 0) return failed(r, "run the event loop");
        return r;
    }

    [[nodiscard]] const std::string& final_message() const { return message_; }

private:
    [[nodiscard]] bool mode(RelayMode m) const { return options_.mode == m; }
    // Whether our input reaches the session (as INPUT).
    [[nodiscard]] bool controls() const { return mode(RelayMode::Run) || mode(RelayMode::Control); }

    // Records why the relay could not run; returns kFailure.
    int failed(int error, const std::string& what) {
        message_ = client::errno_message("ptyvisor: cannot " + what, error);
        return kFailure;
    }

    // Returns 0, or a negative errno with final_message() saying what could not be watched.
    int add_sources() {
        sd_event_source* s = nullptr;
        int r = watch_socket();
        if (r < 0) return failed(r, "watch the daemon socket"), r;

        if (!mode(RelayMode::Follow)) {
            // epoll refuses regular files and /dev/null; those are always "readable", so a
            // defer source (run on every loop iteration while enabled) reads them chunk by chunk.
            r = sd_event_add_io(loop_.get(), &s, STDIN_FILENO, EPOLLIN, &Relay::on_stdin_io, this);
            if (r == -EPERM) r = sd_event_add_defer(loop_.get(), &s, &Relay::on_stdin_defer, this);
            if (r < 0) return failed(r, "watch stdin"), r;
            (void)sd_event_source_set_description(s, "stdin");
            stdin_source_.reset(s);
        }

        r = sd_event_add_io(loop_.get(), &s, STDOUT_FILENO, EPOLLOUT, &Relay::on_stdout, this);
        if (r != -EPERM) {  // else: a file, where writes never wait
            if (r < 0) return failed(r, "watch stdout"), r;
            (void)sd_event_source_set_description(s, "stdout");
            stdout_source_.reset(s);
        }

        std::vector<int> signals{SIGINT, SIGTERM, SIGHUP};
        if (options_.winch_fd >= 0 && controls()) signals.push_back(SIGWINCH);
        for (int sig : signals) {
            r = sd_event_add_signal(loop_.get(), &s, sig, &Relay::on_signal, this);
            if (r < 0) return failed(r, std::string("watch SIG") + sigabbrev_np(sig)), r;
            (void)sd_event_source_set_description(s, (std::string("SIG") + sigabbrev_np(sig)).c_str());
            signal_sources_.emplace_back(s);
        }
        return 0;
    }

    // Runs a callback's body; an exception (an allocation failure, a broken precondition)
    // ends the session instead of crossing C frames.
    template <class F>
    int guarded(F&& body) {
        try {
            body();
        } catch (const std::exception& e) {
            finish_now(kFailure, std::string("ptyvisor: ") + e.what());
        }
        if (!exiting_) update();
        return 0;
    }

    static int on_socket(sd_event_source*, int, std::uint32_t revents, void* self) {
        auto* r = static_cast<Relay*>(self);
        return r->guarded([r, revents] { r->socket_ready(revents); });
    }
    static int on_stdin_io(sd_event_source*, int, std::uint32_t, void* self) {
        auto* r = static_cast<Relay*>(self);
        return r->guarded([r] { r->read_stdin(); });
    }
    static int on_stdin_defer(sd_event_source*, void* self) {
        auto* r = static_cast<Relay*>(self);
        return r->guarded([r] { r->read_stdin(); });
    }
    static int on_stdout(sd_event_source*, int, std::uint32_t, void* self) {
        auto* r = static_cast<Relay*>(self);
        return r->guarded([r] { r->write_stdout(); });
    }
    static int on_signal(sd_event_source*, const signalfd_siginfo* info, void* self) {
        auto* r = static_cast<Relay*>(self);
        const int sig = static_cast<int>(info->ssi_signo);
        return r->guarded([r, sig] { r->handle_signal(sig); });
    }

    void socket_ready(std::uint32_t revents) {
        if ((revents & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0) connection_->flush();
        if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 && !result_ && sink_.empty()) {
            std::vector<client::Event> events;
            std::string why;
            if (!connection_->read_events(events, why)) return finish_now(kFailure, "ptyvisor: " + why);
            for (auto& event : events) {
                if (result_) break;
                std::visit([this](auto& e) { handle(e); }, event);
            }
            write_stdout();
        }
    }

    void handle(client::Started& s) {
        session_id_ = s.id;
        offset_ = 0;
    }
    void handle(client::Attached& a) {
        session_id_ = a.reply.id;
        offset_ = a.reply.offset;
        if (reattach_deadline_) {
            reattach_deadline_.reset();
            // The pause this client saw, from the lost connection to the new ATTACHED (on a
            // terminal it would land in the middle of the screen).
            const auto paused = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - reattach_began_);
            if (!options_.quiet && !stdout_is_tty_)
                note("ptyvisor: re-attached to the session after " + std::to_string(paused.count()) + " ms");
        }
        if (options_.requested_offset && a.reply.offset > *options_.requested_offset)
            note(dropped_before_note(a.reply.offset));
        // The session takes our terminal's size, and its program redraws for it.
        if (mode(RelayMode::Control) && options_.winch_fd >= 0)
            if (auto size = terminal_size(options_.winch_fd)) connection_->queue_resize(*size);
    }
    // Straight to stdout from the frame (no copy into the sink) while stdout keeps up.
    void handle(client::Output& o) {
        offset_ += o.bytes.size();
        check_stdout_write(sink_.write_or_keep(o.bytes));
    }
    void handle(client::Dropped& d) {
        offset_ = d.notice.offset;
        // Nothing on stdout: it carries the session's bytes only. On a terminal a note would
        // land in the middle of the screen being drawn.
        if (!stdout_is_tty_)
            note("ptyvisor: " + std::to_string(d.notice.lost) + " bytes of output were dropped (this client fell "
                 "behind); continuing from offset " + std::to_string(d.notice.offset));
    }
    void handle(client::Detached& d) {
        conclude(0, d.reply.reason == "taken_over" ? "ptyvisor: the session was taken over (by another client, or by a person who supervises it); it goes on" : "");
    }
    void handle(client::Exit& e) {
        if (mode(RelayMode::Follow)) return conclude(0, {});
        conclude(e.status.shell_status(), options_.quiet ? std::string() : describe_end(e.status));
    }
    void handle(client::Error& e) {
        conclude(kFailure, "ptyvisor: " + e.reply.message + " (" +
                               std::string(protocol::to_string(e.reply.code)) + ")");
    }
    // One-shot replies never reach a session connection (Connection checks).
    template <class Other>
    void handle(Other&) {}
    void handle(client::Closed&) {
        if (can_reattach()) return begin_reattach();
        conclude(kFailure, "ptyvisor: connection to the daemon lost");
    }

    // ---- Re-attaching after the daemon went away (RelayOptions::reattach_grace) ----

    [[nodiscard]] bool can_reattach() const {
        return controls() && !session_id_.empty() && options_.reattach_grace.count() > 0 && !options_.socket.empty() &&
               !stopping_ && !detaching_ && !result_;
    }

    int watch_socket() {
        sd_event_source* s = nullptr;
        const int r = sd_event_add_io(loop_.get(), &s, connection_->fd(), EPOLLIN, &Relay::on_socket, this);
        if (r < 0) return r;
        (void)sd_event_source_set_description(s, "daemon socket");
        socket_source_.reset(s);
        return r;
    }

    void begin_reattach() {
        socket_source_.reset();  // the old connection stays until the next attempt replaces it
        if (!reattach_deadline_) {
            reattach_began_ = std::chrono::steady_clock::now();
            reattach_deadline_ = reattach_began_ + options_.reattach_grace;
        }
        schedule_reattach();
    }

    void schedule_reattach() {
        constexpr std::uint64_t kRetryUsec = 50'000;
        std::uint64_t now = 0;
        sd_event_now(loop_.get(), CLOCK_MONOTONIC, &now);
        sd_event_source* s = nullptr;
        const int r = sd_event_add_time(
            loop_.get(), &s, CLOCK_MONOTONIC, now + kRetryUsec, 0,
            [](sd_event_source*, std::uint64_t, void* self) {
                auto* relay = static_cast<Relay*>(self);
                return relay->guarded([relay] { relay->try_reattach(); });
            },
            this);
        if (r < 0) return finish_now(kFailure, client::errno_message("ptyvisor: cannot wait to re-attach", r));
        (void)sd_event_source_set_description(s, "re-attach timer");
        reattach_timer_.reset(s);
    }

    void try_reattach() {
        client::Connection next;
        std::string why;
        const protocol::AttachRequest request{session_id_, {protocol::LogPosition::Kind::Offset, offset_}, false, false};
        if (next.connect(options_.socket, why) && next.attach(request, why)) {
            replacement_ = std::move(next);
            connection_ = &*replacement_;
            if (const int r = watch_socket(); r < 0)
                return finish_now(kFailure, client::errno_message("ptyvisor: cannot watch the daemon socket", r));
            connection_->flush();
            return;
        }
        if (std::chrono::steady_clock::now() >= *reattach_deadline_)
            return conclude(kFailure, "ptyvisor: connection to the daemon lost, and it did not come back: " + why);
        schedule_reattach();
    }
    void handle(client::ProtocolViolation& v) {
        conclude(kFailure, "ptyvisor: protocol error from the daemon: " + v.message);
    }

    void send_input(std::string_view bytes) {
        if (bytes.empty()) return;
        connection_->queue_input(bytes);
        last_input_ = bytes.back();
    }

    void read_stdin() {
        std::array<char, kStdinChunk> buffer;
        const ssize_t n = ::read(STDIN_FILENO, buffer.data(), buffer.size());
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n > 0) {
            const std::string_view input(buffer.data(), static_cast<std::size_t>(n));
            if (mode(RelayMode::Run)) {
                send_input(input);
            } else {
                std::string forward;
                const bool detach = filter_.feed(input, forward);
                if (controls()) send_input(forward);  // an observer's keys go nowhere
                if (detach) request_detach();
            }
            connection_->flush();
            return;
        }
        // End of input (or a read error, which ends it just the same). A terminal that hung
        // up has no more keystrokes; a pipe or file ends a run command's input with ^D. An
        // attached client leaves the session's input as it is.
        stdin_open_ = false;
        if (mode(RelayMode::Control)) send_input(filter_.held());
        if (mode(RelayMode::Run) && !options_.stdin_is_tty && !stopping_) send_input(end_of_input(last_input_));
        connection_->flush();
    }

    void write_stdout() { check_stdout_write(sink_.write_some()); }

    void check_stdout_write(const OutputSink::WriteResult& result) {
        if (result.error == -EPIPE) {
            // Whoever reads our output has gone, as with `| head`: end like a local command
            // killed by SIGPIPE, quietly. Closing the connection ends a run session; an
            // attached client's disconnect leaves a detached one running.
            finish_now(128 + SIGPIPE, {});
        } else if (result.error != 0) {
            finish_now(kFailure, client::errno_message("ptyvisor: cannot write to stdout", result.error));
        }
    }

    void request_detach() {
        if (detaching_) return;
        detaching_ = true;
        connection_->queue_detach();
        connection_->flush();
    }

    void handle_signal(int sig) {
        if (sig == SIGWINCH) {
            if (auto size = terminal_size(options_.winch_fd)) connection_->queue_resize(*size);
        } else if (mode(RelayMode::Follow)) {
            return finish_now(128 + sig, {});
        } else if (sig == SIGINT && controls()) {
            // Not from our terminal (raw mode turns ^C into a byte): pass it on, as ssh does.
            connection_->queue_signal({.signal = SIGINT, .target = protocol::SignalTarget::Foreground});
        } else if (mode(RelayMode::Run) && !stopping_) {
            // SIGTERM, SIGHUP: ask the daemon to stop the session and wait for its EXIT.
            stopping_ = true;
            connection_->queue_stop();
        } else if (!mode(RelayMode::Run) && !detaching_) {
            // An attached client leaves the session running, as a detach key would.
            request_detach();
        } else {
            // Asked twice: stop waiting. Disconnecting makes the daemon clean up.
            finish_now(128 + sig, options_.quiet ? std::string() : "ptyvisor: stopped waiting for the session to end");
            return;
        }
        connection_->flush();
    }

    // The session's outcome is known; exit once the output before it has been written.
    void conclude(int code, std::string message) {
        result_ = code;
        message_ = std::move(message);
    }

    void finish_now(int code, std::string message) {
        if (exiting_) return;
        exiting_ = true;
        message_ = std::move(message);
        sd_event_exit(loop_.get(), code);
    }

    void set_enabled(sd_event_source* s, bool on) {
        if (s == nullptr) return;
        if (const int r = sd_event_source_set_enabled(s, on ? SD_EVENT_ON : SD_EVENT_OFF); r < 0)
            finish_now(kFailure, client::errno_message("ptyvisor: cannot switch an event source", r));
    }

    // Re-derives what to wait for from the state, after every callback.
    void update() {
        if (result_ && sink_.empty()) {
            finish_now(*result_, message_);
            return;
        }
        // Backpressure both ways: read the daemon only when our stdout has taken everything,
        // and read stdin only while the queue to the daemon is below its bound.
        const bool want_in = !result_ && sink_.empty();
        const bool want_out = !result_ && connection_->wants_write();
        const std::uint32_t events = (want_in ? EPOLLIN : 0u) | (want_out ? EPOLLOUT : 0u);
        if (!socket_source_) {  // re-attaching: nothing to read or write until connected
            set_enabled(stdin_source_.get(), false);
            set_enabled(stdout_source_.get(), !sink_.empty());
            if (!sink_.empty() && stdout_source_ == nullptr) write_stdout();
            return;
        }
        if (events != 0) {
            if (const int r = sd_event_source_set_io_events(socket_source_.get(), events); r < 0)
                return finish_now(kFailure, client::errno_message("ptyvisor: cannot watch the daemon socket", r));
        }
        set_enabled(socket_source_.get(), events != 0);
        set_enabled(stdin_source_.get(),
                    stdin_open_ && !stopping_ && !detaching_ && !result_ && !connection_->output_full());
        set_enabled(stdout_source_.get(), !sink_.empty());
        if (!sink_.empty() && stdout_source_ == nullptr) write_stdout();
    }

    client::Connection* connection_;  // the caller's, or replacement_ after a re-attach
    std::optional<client::Connection> replacement_;
    const RelayOptions& options_;
    DetachKeyFilter filter_;
    OutputSink sink_;
    const bool stdout_is_tty_;
    EventPtr loop_;
    SourcePtr socket_source_, stdin_source_, stdout_source_;
    std::vector<SourcePtr> signal_sources_;
    bool stdin_open_ = true;
    bool stopping_ = false;   // STOP sent
    bool detaching_ = false;  // DETACH sent
    bool exiting_ = false;    // sd_event_exit called
    std::optional<char> last_input_;
    std::optional<int> result_;
    // Re-attaching: the session, the next offset we expect, and until when we try.
    std::string session_id_;
    std::uint64_t offset_ = 0;
    std::optional<std::chrono::steady_clock::time_point> reattach_deadline_;
    std::chrono::steady_clock::time_point reattach_began_;
    SourcePtr reattach_timer_;
    std::string message_;
};

}  // namespace

std::string_view end_of_input(std::optional<char> last_byte) {
    if (!last_byte || *last_byte == '\n') return "\x04";
    return "\x04\x04";
}

std::optional<protocol::WindowSize> terminal_size(int fd) {
    winsize ws{};
    if (fd < 0 || ::ioctl(fd, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0) return std::nullopt;
    return protocol::WindowSize{.rows = ws.ws_row, .cols = ws.ws_col};
}

int block_relayed_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGWINCH}) sigaddset(&set, sig);
    // Blocked, they wait for the event loop's signalfd instead of killing us with the
    // terminal still raw.
    if (const int e = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); e != 0) return -e;
    if (::signal(SIGPIPE, SIG_IGN) == SIG_ERR) return -errno;
    return 0;
}

std::chrono::milliseconds reattach_grace_from_environment() {
    const char* text = std::getenv("PTYVISOR_REATTACH_SECONDS");
    if (text == nullptr || *text == '\0') return std::chrono::seconds(30);
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    if (*end != '\0' || !(seconds >= 0) || seconds > 86400) return std::chrono::seconds(30);
    return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

std::string dropped_before_note(std::uint64_t offset) {
    const auto n = std::to_string(offset);
    return "ptyvisor: output before offset " + n + " was dropped; showing from " + n;
}

int relay_session(client::Connection& connection, const RelayOptions& options, std::string& message) {
    // Someone types into this relay: each keystroke wakes it twice (the key, then its echo),
    // and under load each wakeup would otherwise wait behind the machine's busy processes.
    // Best effort: an older kernel ignores it, and nothing here depends on it.
    if (options.stdin_is_tty) request_short_slice();
    Relay relay(connection, options);
    const int code = relay.run();
    message = relay.final_message();
    return code;
}

}  // namespace ptyvisor::cli
