// ScreenWorkerProcess: supervises the screen worker process, ptyvisor-screen
// (docs/security.md, "The screen"), for the screen broker (screen_broker.h), which speaks
// to it over the socket this class hands over at each start.
//
// The worker runs as an identity of its own (screen_identity.h), picked once, or as the
// account the administrator chose; it confines itself (screen/sandbox.h).
//
// Invariants:
//  - At most one worker runs; pid() is it (0: none). It is watched through its pidfd and
//    reaped here, by whichever of exit or kill() comes first; the destructor kills and reaps
//    it without running a hook.
//  - Every worker that started ends with exactly one gone() hook, whatever ended it, and
//    gone() runs before the next start is scheduled. A worker that lived kStableUsec resets
//    the backoff; otherwise each restart waits twice as long as the last, up to
//    kMaxBackoffUsec. None is scheduled once shutting_down() says so.
//  - The reply deadline counts the worker's CPU time, not the clock's: on a loaded machine
//    (the worker runs at nice 10) work can take long without being to blame. A worker that
//    spends reply_timeout_usec of CPU on one piece of work (this attempt's and what earlier
//    starved ones carried) is killed with blame; one that is merely waiting for a CPU is
//    given up to kStuckFactor timeouts of the clock, and then killed without blame, its CPU
//    handed to the starved() hook to carry into the next attempt.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/event.h"
#include "common/unique_fd.h"

namespace ptyvisor::server {

class ScreenWorkerProcess {
public:
    static constexpr std::uint64_t kStuckFactor = 6;  // clock timeouts for a worker without CPU
    static constexpr std::uint64_t kFirstBackoffUsec = 100'000;
    static constexpr std::uint64_t kMaxBackoffUsec = 10'000'000;
    static constexpr std::uint64_t kStableUsec = 30'000'000;  // a worker this old resets the backoff

    struct Options {
        std::string path;  // the worker's binary; empty: installed_path()
        std::string user;  // its account; empty: a uid of its own (screen_identity.h)
        std::uint64_t reply_timeout_usec = 5'000'000;
    };
    struct Hooks {
        // A worker runs; `socket` is the daemon's end of its connection (non-blocking).
        std::function<void(UniqueFd socket)> started;
        // The worker is gone, exited or killed. `blame`: the work in hand is to blame (the
        // worker crashed or spent its reply timeout on it).
        std::function<void(bool blame)> gone;
        // The CPU the worker spent on the work in hand in earlier attempts killed without
        // blame, and, when this one is too, what it has spent now, to carry on.
        std::function<std::uint64_t()> carried_cpu_usec;
        std::function<void(std::uint64_t spent_usec)> starved;
        std::function<bool()> shutting_down;  // then a worker that goes is not restarted
    };

    // Where ptyvisor-screen is: beside the running binary, or where the install puts it.
    static std::string installed_path();

    ScreenWorkerProcess(sd_event* event, Options options, Hooks hooks);
    ~ScreenWorkerProcess();
    ScreenWorkerProcess(const ScreenWorkerProcess&) = delete;
    ScreenWorkerProcess& operator=(const ScreenWorkerProcess&) = delete;

    // Starts a worker (started() runs before this returns); failing to is logged, and
    // retried after the backoff.
    void start();
    // Kills the worker, if one runs (gone(blame) runs before this returns).
    void kill(const char* why, bool blame = false);
    // The worker closed its end of the socket: it exited, or will; it is to blame.
    void exited();

    // A reply is owed from now: the deadline is measured from here.
    void arm_deadline();
    // No reply is owed.
    void disarm_deadline() { deadline_timer_.reset(); }
    [[nodiscard]] bool deadline_armed() const { return deadline_timer_ != nullptr; }

    [[nodiscard]] pid_t pid() const { return pid_; }
    [[nodiscard]] std::uint64_t starts() const { return starts_; }  // workers started so far

private:
    bool spawn(UniqueFd& socket, std::string& why);
    void gone(bool blame);
    void schedule_restart();
    void rearm_deadline(std::uint64_t usec);
    void on_deadline();
    [[nodiscard]] std::uint64_t cpu_usec() const;

    sd_event* event_;
    Options options_;
    Hooks hooks_;
    std::optional<uid_t> uid_;  // the worker's own uid, once picked
    pid_t pid_ = 0;
    UniqueFd pidfd_;
    EventSource pidfd_source_, deadline_timer_, restart_timer_;
    std::uint64_t deadline_cpu_usec_ = 0, deadline_wall_usec_ = 0;  // when the deadline was armed
    std::uint64_t backoff_usec_ = kFirstBackoffUsec, started_usec_ = 0, starts_ = 0;
};

}  // namespace ptyvisor::server
