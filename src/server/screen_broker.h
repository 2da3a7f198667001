// ScreenBroker: the daemon's side of the screen (docs/security.md, "The screen").
//
// No terminal emulator parses session output in the daemon. The broker has ptyvisor-screen
// run (a sandboxed, unprivileged process, supervised by ScreenWorkerProcess:
// screen_worker_process.h), hands it each session's output log read-only, tells it how far
// each log has grown, and relays SNAPSHOT requests to it. It sees a session only as a
// ScreenSubject (screen_subject.h). Everything the worker sends is untrusted:
//  - a message longer than its bound, of an unknown type, about an unknown session or
//    ticket, or a SCREEN whose shape is not the session's (protocol/screen_payloads.h),
//    kills the worker; so does a worker that owes a reply for longer than [screen]
//    reply_timeout of its CPU time (screen_worker_process.h);
//  - its answers to terminal queries are written to a session's terminal only when each is
//    of a form a terminal sends (is_terminal_answer) and no controller with a terminal of
//    its own is attached (that terminal answers instead: never both);
//  - a shell's mark (MARK, shell_mark.h) is handed to its session only when each field is
//    within its bound, its offset at most the log's end the worker was told of and not
//    before the worker's previous mark of that session, and an Advanced of the session is
//    owed (the worker sends a session's marks just before one).
// A worker that dies or is killed is restarted after a backoff and rebuilds every screen
// from the logs; sessions never wait for it, and no output is lost (the log is the
// daemon's). While none runs, SNAPSHOT fails with INTERNAL.
//
// A session whose output the worker cannot get through (bytes that crash libvterm, or that
// cost it longer than the reply timeout: an insert-line on a 1000x1000 screen moves a
// million cells) would otherwise stop every session's screen, again at each restart, since
// each restart replays the log. The worker handles its messages in order, so the broker knows
// whose output it was on when it crashed or ran out of time: that session takes a strike, and
// at kMaxStrikes its screen is turned off (its SNAPSHOTs fail, its queries go unanswered), so
// that the others' come back.
//
// Notices are coalesced: at most one Advance per session is unacknowledged, so a flood of
// output costs the worker one message per reply, not one per read. A bulk session (one that
// floods, ScreenSubject::bulk) is told of its output only once kBulkAdvanceBytes have come,
// or kBulkAdvanceDelayUsec after the first byte it has not been told of (output_batch.h):
// each round costs the worker and the daemon a wakeup, which on a loaded machine costs more
// than parsing 64 KiB.
// A SNAPSHOT is never stale for it (it names the log's end), and a query in a flood is
// answered that much later. Idle sessions cost nothing: no timer runs while nothing is owed.
//
// What waits to be sent to the worker is bounded: an agent can resize its terminal far faster
// than a worker at nice 10 can follow, and each RESIZE would otherwise wait in the daemon's
// memory, as many as the agent sends. A Resize that follows another of the same session with
// no output between replaces it. Past kMaxBacklogBytes, or kMaxBacklogFds logs waiting to be
// handed over (sessions started in a burst while the worker is starved), the worker is too
// far behind to be worth waiting for: it is killed, without blame, and its successor
// rebuilds every screen from the logs, as after a crash.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/event.h"
#include "common/unique_fd.h"
#include "protocol/screen_payloads.h"
#include "server/output_batch.h"
#include "server/log_follower.h"
#include "server/screen_subject.h"
#include "server/screen_worker_process.h"

namespace ptyvisor::server {

struct ScreenSettings;

// Whether `bytes` is a sequence of answers a terminal sends to queries (CPR, DSR, DA1, DA2,
// DECRPM, DECRQSS, OSC 4/10/11/12 colours), and nothing else.
bool is_terminal_answer(std::string_view bytes);

class ScreenBroker final : public LogFollower {
  public:
    static constexpr int kMaxStrikes = 2;
    static constexpr std::uint32_t kScrollbackLines = 1000;
    static constexpr std::uint64_t kBulkAdvanceBytes = 256 * 1024;
    static constexpr std::uint64_t kBulkAdvanceDelayUsec = 10'000;
    static constexpr std::size_t kMaxBacklogBytes = 1 << 20;
    static constexpr std::size_t kMaxBacklogFds = 256;

    struct Options {
        bool enabled = true;  // false: no worker; SNAPSHOT fails, queries go unanswered
        std::string user;     // the worker's account; empty: a uid of its own
        std::uint64_t reply_timeout_usec = 5'000'000;  // of the worker's CPU, per reply owed
        std::string worker_path;  // empty: ScreenWorkerProcess::installed_path()
    };

    // `shutting_down`: whether the daemon is stopping (then a worker that goes stays gone).
    ScreenBroker(sd_event* event, Options options, std::function<bool()> shutting_down);
    ScreenBroker(const ScreenBroker&) = delete;
    ScreenBroker& operator=(const ScreenBroker&) = delete;

    // Starts the worker. Failing to is logged; the daemon serves on, without screens.
    void start();

    // LogFollower. A subject is known from log_opened() to log_closed(), and outlives that.
    void log_opened(ScreenSubject& session) override;
    void log_changed(ScreenSubject& session) override;
    void log_resized(ScreenSubject& session) override;
    void log_closed(ScreenSubject& session) override;

    // SNAPSHOT. `done` runs later (never inside this call) with true and the SCREEN payload,
    // or false and why. Returns a ticket for cancel() (a connection that goes first).
    using Done = std::function<void(bool ok, std::string payload_or_why)>;
    std::uint32_t snapshot(ScreenSubject& session, const protocol::SnapshotRequest& request, Done done);
    void cancel(std::uint32_t ticket);

    // For tests and STATUS: the worker's pid (0: none) and how many times it was started.
    [[nodiscard]] pid_t worker_pid() const { return worker_.pid(); }
    [[nodiscard]] std::uint64_t starts() const { return worker_.starts(); }

  private:
    struct Tracked {
        ScreenSubject* session = nullptr;
        std::uint32_t number = 0;
        bool advance_in_flight = false;
        std::uint64_t notified_end = 0;
        std::uint64_t last_mark = 0;  // the offset of the worker's last mark of this session
        int strikes = 0;  // times in a row the worker crashed or timed out on its output
        // CPU the worker spent on this session's output in attempts killed without a strike
        // (starved, not slow); it counts toward the next attempt's timeout.
        std::uint64_t unanswered_cpu_usec = 0;
    };
    // What the worker was sent that makes it process a session's output, in the order it
    // handles them; `replies`: whether it answers (Open, Advance, Snapshot; not Resize).
    struct Work {
        std::uint32_t number;
        bool replies;
    };
    struct Pending {
        const ScreenSubject* session = nullptr;
        std::string id;
        protocol::ScreenBounds bounds;
        Done done;
    };
    struct Outgoing {
        std::vector<std::uint8_t> bytes;
        UniqueFd fd;
        std::size_t sent = 0;
        // A Resize: of which session, at which offset of its log (0: not a Resize).
        std::uint32_t resize_of = 0;
        std::uint64_t resize_at = 0;
    };

    // ScreenWorkerProcess's hooks.
    void worker_started(UniqueFd socket);
    void worker_gone(bool blame);
    Tracked* work_in_hand();

    void open_in_worker(Tracked& t);
    enum class Batch { Allowed, Never };
    // Tells the worker how far the session's log has grown, unless an Advance is unanswered,
    // or the session is bulk, `batch` allows waiting, and too little has come (then batch_
    // will).
    void send_advance(Tracked& t, Batch batch = Batch::Allowed);
    void queue(std::vector<std::uint8_t> bytes, UniqueFd fd = {}, std::uint32_t resize_of = 0, std::uint64_t resize_at = 0);
    void flush();
    void on_socket(std::uint32_t revents);
    bool handle(std::uint8_t type, std::span<const std::uint8_t> body);
    bool handle_advanced(std::span<const std::uint8_t> body);
    bool handle_screen(std::span<const std::uint8_t> body);
    bool handle_mark(std::span<const std::uint8_t> body);
    void owe_reply();
    void paid_reply();
    void strike(std::uint32_t number);
    void fail_pending(const std::string& why);
    void finish_later(std::uint32_t ticket, Done done, bool ok, std::string text);
    void run_finished();
    Tracked* find(std::uint32_t number);

    sd_event* event_;
    Options options_;
    // Declared first, so destroyed last: the worker is killed after every source that could
    // call into it is gone.
    ScreenWorkerProcess worker_;
    std::map<ScreenSubject*, Tracked> tracked_;
    std::set<const ScreenSubject*> screenless_;  // struck out: no screen until they end
    std::deque<Work> work_;
    std::map<std::uint32_t, Pending> pending_;
    // Replies still owed about sessions that have gone: expected, and then forgotten.
    std::set<std::uint32_t> gone_advances_, gone_tickets_;
    std::uint32_t next_number_ = 0, next_ticket_ = 0;

    UniqueFd socket_;  // to the worker, while one runs
    EventSource socket_source_;
    // Waits while a bulk session's Advance does (send_advance); then sends every one due.
    OutputBatch batch_;
    std::deque<Outgoing> outgoing_;
    std::size_t backlog_bytes_ = 0, backlog_fds_ = 0;  // of outgoing_, not yet sent
    std::vector<std::uint8_t> incoming_;
    std::uint64_t owed_ = 0;  // replies the worker owes (Advance and Snapshot)
    struct Finished {
        std::uint32_t ticket;
        Done done;
        bool ok;
        std::string text;
    };
    std::vector<Finished> finished_;  // run by finished_source_ on the next iteration
    EventSource finished_source_;
};

// The broker's options from the daemon's [screen] settings (config.h).
ScreenBroker::Options screen_broker_options(const ScreenSettings& settings);

}  // namespace ptyvisor::server
