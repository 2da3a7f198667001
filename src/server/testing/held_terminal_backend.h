// HeldTerminalBackend: a backend for unit tests of Session and SessionRegistry, driven by
// the test on the test's own sd-event loop.
//
// start() keeps the terminal's peer (as a command would hold it) and reports the start on
// the next loop iteration. The test then plays the command: write() prints to the terminal,
// exit() closes the peer and reports the main process's end, and stop() is answered on the
// next iteration, closing the peer (the processes are gone) with the verdict in
// `stop_succeeds`. Nothing here sleeps: the tests run the loop until what they expect is true.
#pragma once

#include <unistd.h>

#include <string>
#include <string_view>
#include <utility>

#include "backends/backend.h"
#include "common/event.h"

namespace ptyvisor::server::testing {

class HeldTerminalBackend;

class HeldTerminalSession final : public backends::SessionProcesses {
public:
    HeldTerminalSession(HeldTerminalBackend& backend, sd_event* event, UniqueFd tty, backends::SessionEvents events);
    ~HeldTerminalSession() override;
    [[nodiscard]] const std::string& unit() const override { return unit_; }
    [[nodiscard]] pid_t main_pid() const override { return 4242; }
    int signal_all(int) override { return 0; }
    int signal_foreground_group(pid_t, int) override { return 0; }
    void stop(backends::Clock::time_point, std::function<void(bool, std::string)> done) override;

    // The command prints `text`.
    void write(std::string_view text) { [[maybe_unused]] const auto n = ::write(tty_.get(), text.data(), text.size()); }
    // The command exits with `code`; the terminal's last holder goes with it.
    void exit(int code) {
        tty_.reset();
        protocol::ExitStatus status;
        status.kind = protocol::ExitStatus::Kind::Exited;
        status.code = code;
        events_.on_exited(status);
    }
    // The command exits but leaves a child holding the terminal.
    void exit_leaving_terminal_open(int code) {
        protocol::ExitStatus status;
        status.kind = protocol::ExitStatus::Kind::Exited;
        status.code = code;
        events_.on_exited(status);
    }
    void fail_start(const std::string& why) { events_.on_start_failed(why); }

    int stops = 0;  // how many times stop() was asked

private:
    HeldTerminalBackend& backend_;
    sd_event* event_;
    UniqueFd tty_;
    backends::SessionEvents events_;
    std::string unit_ = "held.service";
    EventSource started_, stopped_;
};

class HeldTerminalBackend final : public backends::Backend {
public:
    explicit HeldTerminalBackend(sd_event* event) : event_(event) {}

    bool report_start = true;       // false: on_started is left to the test (fail_start, ...)
    bool refuse_start = false;      // start() fails at once
    bool stop_succeeds = true;      // what stop() answers
    HeldTerminalSession* last = nullptr;  // the newest session still alive
    int starts = 0;

    [[nodiscard]] std::string_view name() const override { return "held-terminal"; }
    bool cleanup_orphans(backends::Clock::time_point, std::string&) override { return true; }
    std::unique_ptr<backends::SessionProcesses> start(backends::SessionSpec spec, backends::SessionEvents events,
                                             std::string& why) override {
        if (refuse_start) {
            why = "refused by the test";
            return nullptr;
        }
        ++starts;
        auto session = std::make_unique<HeldTerminalSession>(*this, event_, std::move(spec.tty), std::move(events));
        last = session.get();
        return session;
    }
    backends::PeerVerdict check_peer(const backends::Peer&, std::string&) override { return backends::PeerVerdict::Allowed; }
    void recheck(backends::RecheckCallback) override {}

private:
    friend class HeldTerminalSession;
    sd_event* event_;
};

inline HeldTerminalSession::HeldTerminalSession(HeldTerminalBackend& backend, sd_event* event, UniqueFd tty,
                                                backends::SessionEvents events)
    : backend_(backend), event_(event), tty_(std::move(tty)), events_(std::move(events)) {
    if (backend_.report_start) add_defer(event_, started_, [this] { events_.on_started(4242); });
}

inline HeldTerminalSession::~HeldTerminalSession() {
    if (backend_.last == this) backend_.last = nullptr;
}

inline void HeldTerminalSession::stop(backends::Clock::time_point, std::function<void(bool, std::string)> done) {
    ++stops;
    add_defer(event_, stopped_, [this, done = std::move(done)] {
        tty_.reset();  // the session's processes are gone, and their terminal with them
        done(backend_.stop_succeeds, backend_.stop_succeeds ? "" : "a process outlived the deadline");
    });
}

}  // namespace ptyvisor::server::testing
