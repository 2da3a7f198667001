// Connection: one client, from accept to close, on the daemon's event loop.
//
// Its first frame says what it is for, and the protocol version it speaks (1 or 2):
//  - START: a new session (session.h), which this connection controls; without `detach`
//    the session is bound to it and ends when it goes;
//  - ATTACH (version 2): an existing session, as controller or observer;
//  - STATUS_REQUEST, LIST, READ, WAIT, KILL, SEND: one request, one reply, then close.
//
// Its stages, each entered through enter() alone, which logs the transition at debug level:
//
//   Handshake --START started, ATTACH--> Relay ------------+
//       |--WAIT, KILL that waits, SNAPSHOT--> Request -----+--the last frame queued--> Closing --sent--> Closed
//       +--any other reply, or ERROR from any stage---------+
//
//  - Handshake: until the first frame's request is answered or under way; only this stage
//    holds one of the admission's handshake slots, under the handshake deadline.
//  - Request: a one-shot request waits for its answer (a WAIT's condition, a KILL's end, the
//    screen worker's SNAPSHOT), under a timeout of its own.
//  - Relay: attached to a session; OUTPUT follows STARTED or ATTACHED.
//  - Closing: the last frame (EXIT, DETACHED, ERROR, a reply) is queued; nothing the client
//    says matters any more. A connection may close from any stage (the client went).
// What is left as flags is I/O fact: the socket's end seen, output held while descriptors
// close (both the transport's), a stalled client's output discarded, STARTED or ATTACHED
// queued.
//
// The transport (the socket, the decoder, the queue, the disposal of client descriptors) is
// a ClientTransport (client_transport.h), which asks and tells this connection through its
// Handler; the requests are in connection_requests.cpp and connection_screen.cpp; a START's
// checks and its admission slot in SessionStarter (session_starter.h).
//
// A START stays in the Handshake phase while a worker thread checks its directory and
// resolves its command (BlockingWorker), and while the backend rechecks a peer it is Unsure
// of; the socket is not read meanwhile, so later frames wait in order. The handshake
// deadline bounds both waits.
//
// Invariants (the transport's own are in client_transport.h: client descriptors, reads per
// wakeup, the stall timeout):
//  - Every descriptor the client sends is the transport's, until a START takes its working
//    directory into SessionStarter; whatever is left of either is closed on a worker. All
//    of it, and the peer's pidfd, are closed before the client can see EOF.
//  - No exception leaves a handler of this connection: one that is thrown ends this
//    connection with ERROR internal, never the daemon. The transport's callbacks end in
//    on_exception() too (Handler::transport_failed).
//  - A connection never owns a session: it attaches to one in the registry, reads its output
//    log at a cursor of its own, and detaches before it goes.
//  - STARTED or ATTACHED precedes every OUTPUT; all output precedes EXIT; EXIT, DETACHED,
//    ERROR and every reply are last frames, followed by close.
//  - Frames are written in the connection's version; before the first frame is read, in
//    version 1, which every client reads.
//  - A bulk session's output (Session::bulk: a flood) is written once a whole frame has come,
//    or kBulkOutputDelay after the first byte that waits, whichever is first; any other
//    session's at once. Every OUTPUT frame wakes the client, and each wakeup costs the machine
//    more than the bytes: unbatched, a few floods wake their clients thousands of times a
//    second, and the keystrokes of another session wait for a CPU behind them.
//  - Memory is bounded: at most one decoder frame, the session's held input, and
//    kPumpBytes (+ one frame) of OUTPUT per connection; a one-shot reply (READ, LIST,
//    SNAPSHOT), what the ReplyBudget grants its uid (reply_budget.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/event.h"
#include "common/unique_fd.h"
#include "protocol/frame_decoder.h"
#include "protocol/payloads.h"
#include "server/audit_log.h"
#include "server/blocking_worker.h"
#include "server/client_transport.h"
#include "server/output_batch.h"
#include "server/output_queue.h"
#include "server/peer.h"
#include "server/session.h"
#include "server/session_roles.h"
#include "protocol/command_payloads.h"
#include "server/session_starter.h"
#include "server/wait_condition.h"

namespace ptyvisor::server {

class Server;

// A session's state as the protocol says it (Draining, Stopping and Closing are "running").
protocol::State wire_state(const Session& s);

class Connection final : public SessionClient, private ClientTransport::Handler {
public:
    enum class Stage { Handshake, Request, Relay, Closing, Closed };

    Connection(Server& server, UniqueFd socket, PeerIdentity peer);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // Registers event sources and the handshake deadline. Returns a negative errno.
    int begin();

    // The daemon is stopping: a handshake gets ERROR shutting_down, a session ends with
    // reason shutdown.
    void shut_down();
    // Admission took this handshake's slot for a fairer peer.
    void evict();
    // Closes at once (a connection the loop cannot watch); the session, if any, goes on.
    void abandon();
    // The server is being destroyed: forget the session without detaching from it.
    void forget_session() { session_ = nullptr; }

    [[nodiscard]] Stage stage() const { return stage_; }
    [[nodiscard]] pid_t peer_pid() const { return peer_.cred.pid; }
    [[nodiscard]] std::uint64_t serial() const { return serial_; }

    // SessionClient.
    void session_started() override;
    void session_start_failed(const std::string& why) override;
    void session_changed() override;
    void session_input_room() override;
    void session_gone() override;
    void session_taken_over() override;
    void control_changed() override;
    [[nodiscard]] int protocol_version() const override { return version_; }
    [[nodiscard]] std::uint64_t cursor() const override { return cursor_; }
    [[nodiscard]] bool has_terminal() const override { return terminal_; }

private:
    // The one place the stage changes: checks that `next` may follow (a bug throws, which
    // ends this connection only), logs it at debug level, and does what entering it means.
    void enter(Stage next);
    // The last frame (EXIT, DETACHED, ERROR, a reply) is queued, or sent.
    [[nodiscard]] bool last_frame_queued() const { return stage_ >= Stage::Closing; }

    // ClientTransport::Handler.
    [[nodiscard]] Watch watch() const override;
    [[nodiscard]] bool may_read() const override { return reading(); }
    [[nodiscard]] bool may_hold_fds(std::size_t held) const override;
    void fds_refused(const char* why) override;
    bool handle_frames() override;
    void client_hung_up(bool reset) override;
    void client_ended() override;
    void client_went_away() override;
    void fill_queue() override { pump_output(); }
    bool queue_drained() override;
    void client_stalled() override;
    void last_frame_unread() override { close(); }
    void event_failed(int r, const char* what) override;
    void transport_failed(const char* where) noexcept override { on_exception(where); }

    // Handshake.
    [[nodiscard]] bool reading() const;
    void handle_frame(protocol::Frame& frame);
    void handle_start(const protocol::Frame& frame);
    // Waiting for a worker's or the backend's answer: only a hang-up is read meanwhile.
    [[nodiscard]] bool awaiting_answer() const {
        return (starter_ && starter_->waiting()) || snapshot_ticket_ != 0 || kill_signal_ || exec_ || watch_;
    }
    void handle_status_request();
    void on_handshake_timeout();

    // Version 2 requests (connection_requests.cpp).
    [[nodiscard]] Access access();
    bool find_session_access(Request request);
    Session* find_session(const std::string& id, Request request);
    void handle_attach(const protocol::Frame& frame);
    void handle_list();
    void handle_read(const protocol::Frame& frame);
    void handle_wait(const protocol::Frame& frame);
    void handle_kill(const protocol::Frame& frame);
    void handle_send(const protocol::Frame& frame);
    void handle_snapshot(const protocol::Frame& frame);  // connection_screen.cpp
    // Version 5 (connection_control.cpp): a person at the wheel, and recordings.
    [[nodiscard]] std::string_view role_name(Access access) const;
    void refuse_held(Session& session);  // ERROR held_by_supervisor (busy before version 5)
    // The session's final status as this client's version may be told it (docs/protocol.md,
    // 13.2); nullopt until it has ended.
    [[nodiscard]] std::optional<protocol::ExitStatus> exit_told(const Session& session) const;
    // One act of this client's on `session` into the audit log (docs/policy.md): `kind` with
    // the peer's pid and uid; `fill` sets the act's own fields.
    void audit(AuditKind kind, const Session& session, const std::function<void(AuditRecord&)>& fill = {});
    void handle_control(const protocol::Frame& frame);
    void refuse_relay(protocol::FrameType type);  // REFUSED, at most once a second, counted
    void tell_refused(protocol::FrameType type);
    void push_refused_count();
    void push_controller();   // queues CONTROLLER (or marks it untold) and flushes
    void queue_controller();
    void handle_recording(const protocol::Frame& frame);
    // Version 4 (connection_commands.cpp).
    void handle_commands(const protocol::Frame& frame);
    void handle_exec(const protocol::Frame& frame);
    void handle_watch(const protocol::Frame& frame);
    // Attaches to `session` as one of its readers for a request that waits (WAIT, KILL, EXEC,
    // WATCH); `input`: the request wants to know when the program waits for input.
    void attach_waiting(Session& session, bool input);
    void check_exec();
    void exec_timed_out();
    void finish_exec(protocol::ExecReply::Outcome outcome, std::optional<protocol::CommandRecord> record);
    void check_watch();
    void push_event(const protocol::SessionEvent& event);
    // Whether the client relays a real terminal: said by START or ATTACH from version 3;
    // assumed of older clients, which answered queries themselves before version 3.
    void set_terminal(bool said) { terminal_ = version_ < 3 || said; }
    void handle_detach();
    void check_wait();
    void finish_wait(bool matched, std::string reason);
    void reply(protocol::FrameType type, const std::string& payload);
    // Reserves `bytes` of the server's ReplyBudget for this connection's reply; all of them
    // (whole) or as many as are left. Released when the connection closes.
    bool reserve_reply(std::size_t bytes);
    std::size_t reserve_reply_up_to(std::size_t bytes);

    // Relay.
    void handle_relay_frame(protocol::Frame& frame);
    void handle_signal(const protocol::Frame& frame);
    void deliver_signals();
    void deliver_kill_signal();
    void pump_output();
    void flush_output() { transport_.flush(); }
    bool output_may_wait();
    void update_socket_events() { transport_.update_events(); }
    void leave_session(bool disconnected);

    // End.
    void send_error(protocol::ErrorCode code, const std::string& message);
    void close();
    void leave_handshake();

    // Client descriptors.
    SessionStarter::Leftovers abandon_start();
    void dispose_client_fds();

    // Every handler of this connection runs through guarded(): an exception ends the
    // connection (on_exception), and goes no further.
    template <class F>
    auto guarded(const char* where, F f);
    void on_exception(const char* where) noexcept;
    Server& server_;
    PeerIdentity peer_;
    std::uint64_t serial_;
    Stage stage_ = Stage::Handshake;
    bool holds_handshake_slot_ = true;

    std::uint8_t version_ = protocol::kOldestVersion;  // fixed by the first frame
    bool version_known_ = false;
    bool terminal_ = false;
    std::uint32_t snapshot_ticket_ = 0;  // a SNAPSHOT the screen broker has not answered
    // The START being checked and started, from its frame to STARTED or its ERROR.
    std::unique_ptr<SessionStarter> starter_;
    // The socket, its decoder and queue, and the descriptors the client sent.
    ClientTransport transport_;

    EventSource handshake_timer_, wait_timer_, quiet_timer_;
    // A bulk session's output waits for a whole frame or kBulkOutputDelayUsec (output_batch.h).
    OutputBatch batch_;
    EventSource search_source_;  // a WAIT for text has more of the log to search (check_wait)

    // The session this connection is attached to, in its role; null once it has gone.
    Session* session_ = nullptr;
    Role role_ = Role::Observer;
    bool may_hold_ = false;                 // a supervisor attached: CONTROL may take the terminal
    std::uint64_t refused_pending_ = 0;     // the agent's frames refused since the last REFUSED
    std::uint64_t refused_told_usec_ = 0;   // when the last REFUSED went (CLOCK_MONOTONIC)
    bool controller_untold_ = false;        // a CONTROLLER waits for the queue to drain
    std::uint64_t cursor_ = 0;     // the next log offset to send
    bool relaying_ = false;        // STARTED or ATTACHED is queued: OUTPUT may follow
    bool discard_output_ = false;  // a stalled client: what it did not take is dropped

    // A WAIT or a KILL that waits for the end, while it waits.
    std::unique_ptr<WaitCondition> waiter_;
    // An EXEC, from its frame to EXECUTED (connection_commands.cpp).
    struct ExecRun {
        protocol::ExecRequest request;
        bool typed = false;         // the command line was written to the session
        bool interrupting = false;  // Ctrl-C was written at the timeout
        std::uint64_t seq_before = 0;  // the newest seq when it was typed: its command's is greater
    };
    std::unique_ptr<ExecRun> exec_;
    // A WATCH: what it has told its client of so far.
    struct WatchState {
        std::uint64_t started = 0, ended = 0;  // seqs
        std::uint64_t prompts = 0, waits = 0;
    };
    std::unique_ptr<WatchState> watch_;
    bool wants_input_ = false;  // asked the session's InputWatch to probe (attach_waiting)

    // SIGNALs not delivered yet, each at most once (as the kernel keeps a standard signal
    // pending once): the session paces deliveries (Session::signal_wait_usec), and what a
    // client sends meanwhile is coalesced here, so a flood of SIGNAL frames costs the loop
    // no more than the pace. A KILL with a signal waits for the pace the same way.
    std::vector<protocol::SignalRequest> pending_signals_;
    struct KillSignal {
        std::string id;
        int signal = 0;
    };
    std::optional<KillSignal> kill_signal_;
    std::size_t reply_reserved_ = 0;  // of the server's ReplyBudget
    EventSource signal_timer_;
};

template <class F>
auto Connection::guarded(const char* where, F f) {
    return [this, where, f = std::move(f)](auto&&... args) {
        try {
            f(std::forward<decltype(args)>(args)...);
        } catch (...) {
            on_exception(where);
        }
    };
}

}  // namespace ptyvisor::server
