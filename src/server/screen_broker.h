// ScreenBroker: the daemon's side of the screen (docs/security.md, "The screen").
//
// No terminal emulator parses session output in the daemon. The broker starts
// ptyvisor-screen (a sandboxed, unprivileged process: screen/sandbox.h), hands it each
// session's output log read-only, tells it how far each log has grown, and relays
// SNAPSHOT requests to it. Everything the worker sends is untrusted:
//  - a message longer than its bound, of an unknown type, about an unknown session or
//    ticket, or a SCREEN whose shape is not the session's (protocol/screen_payloads.h),
//    kills the worker; so does a worker that owes a reply for longer than [screen]
//    reply_timeout;
//  - its answers to terminal queries are written to a session's terminal only when each is
//    of a form a terminal sends (is_terminal_answer) and no controller with a terminal of
//    its own is attached (that terminal answers instead: never both).
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
// floods, Session::bulk) is told of its output only once kBulkAdvanceBytes have come, or
// kBulkAdvanceDelayUsec after the first byte it has not been told of: each round costs the
// worker and the daemon a wakeup, which on a loaded machine costs more than parsing 64 KiB.
// A SNAPSHOT is never stale for it (it names the log's end), and a query in a flood is
// answered that much later. Idle sessions cost nothing: no timer runs while nothing is owed.
//
// What waits to be sent to the worker is bounded: an agent can resize its terminal far faster
// than a worker at nice 10 can follow, and each RESIZE used to wait in the daemon's memory
// (3 million made it grow by 270 MB). A Resize that follows another of the same session with
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
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/event.h"
#include "common/unique_fd.h"
#include "protocol/screen_payloads.h"

namespace ptyvisor::server {

class Server;
class Session;

// Whether `bytes` is a sequence of answers a terminal sends to queries (CPR, DSR, DA1, DA2,
// DECRPM, DECRQSS, OSC 4/10/11/12 colours), and nothing else.
bool is_terminal_answer(std::string_view bytes);

class ScreenBroker {
  public:
    static constexpr int kMaxStrikes = 2;
    static constexpr std::uint64_t kStuckFactor = 6;  // clock timeouts for a worker without CPU
    static constexpr std::uint64_t kFirstBackoffUsec = 100'000;
    static constexpr std::uint64_t kMaxBackoffUsec = 10'000'000;
    static constexpr std::uint32_t kScrollbackLines = 1000;
    static constexpr std::uint64_t kBulkAdvanceBytes = 256 * 1024;
    static constexpr std::uint64_t kBulkAdvanceDelayUsec = 10'000;
    static constexpr std::size_t kMaxBacklogBytes = 1 << 20;
    static constexpr std::size_t kMaxBacklogFds = 256;

    explicit ScreenBroker(Server& server) : server_(server) {}
    ~ScreenBroker();
    ScreenBroker(const ScreenBroker&) = delete;
    ScreenBroker& operator=(const ScreenBroker&) = delete;

    // Starts the worker. Failing to is logged; the daemon serves on, without screens.
    void start();

    // Session hooks.
    void opened(Session& session);
    void output(Session& session);
    void resized(Session& session);
    void closed(Session& session);

    // SNAPSHOT. `done` runs later (never inside this call) with true and the SCREEN payload,
    // or false and why. Returns a ticket for cancel() (a connection that goes first).
    using Done = std::function<void(bool ok, std::string payload_or_why)>;
    std::uint32_t snapshot(Session& session, const protocol::SnapshotRequest& request, Done done);
    void cancel(std::uint32_t ticket);

    // For tests and STATUS: the worker's pid (0: none) and how many times it was started.
    [[nodiscard]] pid_t worker_pid() const { return pid_; }
    [[nodiscard]] std::uint64_t starts() const { return starts_; }

  private:
    std::optional<uid_t> worker_uid_;  // the worker's own uid, once picked (screen_identity.h)
    struct Tracked {
        Session* session = nullptr;
        std::uint32_t number = 0;
        bool advance_in_flight = false;
        std::uint64_t notified_end = 0;
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
        Session* session = nullptr;
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

    bool spawn(std::string& why);
    void open_in_worker(Tracked& t);
    enum class Batch { Allowed, Never };
    // Tells the worker how far the session's log has grown, unless an Advance is unanswered,
    // or the session is bulk, `batch` allows waiting, and too little has come (then the
    // batch timer will).
    void send_advance(Tracked& t, Batch batch = Batch::Allowed);
    void on_batch_timer();
    void queue(std::vector<std::uint8_t> bytes, UniqueFd fd = {}, std::uint32_t resize_of = 0, std::uint64_t resize_at = 0);
    void flush();
    void on_socket(std::uint32_t revents);
    void on_worker_exit();
    bool handle(std::uint8_t type, std::span<const std::uint8_t> body);
    bool handle_advanced(std::span<const std::uint8_t> body);
    bool handle_screen(std::span<const std::uint8_t> body);
    void owe_reply();
    void paid_reply();
    void kill_worker(const char* why, bool blame = false);
    void worker_gone(bool blame);
    void strike(std::uint32_t number);
    [[nodiscard]] std::uint64_t reply_timeout_usec() const;
    void arm_deadline();
    void rearm_deadline(std::uint64_t usec);
    void on_deadline();
    [[nodiscard]] std::uint64_t worker_cpu_usec() const;
    void schedule_restart();
    void fail_pending(const std::string& why);
    void finish_later(std::uint32_t ticket, Done done, bool ok, std::string text);
    void run_finished();
    Tracked* find(std::uint32_t number);

    Server& server_;
    std::map<Session*, Tracked> tracked_;
    std::set<const Session*> screenless_;  // struck out: no screen until they end
    std::deque<Work> work_;
    std::map<std::uint32_t, Pending> pending_;
    // Replies still owed about sessions that have gone: expected, and then forgotten.
    std::set<std::uint32_t> gone_advances_, gone_tickets_;
    std::uint32_t next_number_ = 0, next_ticket_ = 0;

    pid_t pid_ = 0;
    UniqueFd pidfd_, socket_;
    EventSource socket_source_, pidfd_source_, deadline_timer_, restart_timer_;
    EventSource batch_timer_;  // armed while a bulk session's Advance waits (send_advance)
    std::deque<Outgoing> outgoing_;
    std::size_t backlog_bytes_ = 0, backlog_fds_ = 0;  // of outgoing_, not yet sent
    std::vector<std::uint8_t> incoming_;
    std::uint64_t owed_ = 0;  // replies the worker owes (Advance and Snapshot)
    std::uint64_t deadline_cpu_usec_ = 0, deadline_wall_usec_ = 0;  // when the deadline was armed
    std::uint64_t backoff_usec_ = kFirstBackoffUsec, started_usec_ = 0, starts_ = 0;
    struct Finished {
        std::uint32_t ticket;
        Done done;
        bool ok;
        std::string text;
    };
    std::vector<Finished> finished_;  // run by finished_source_ on the next iteration
    EventSource finished_source_;
};

}  // namespace ptyvisor::server
