// Session: one terminal and the command on it, from START to the end of its retention.
//
// Sessions belong to the SessionRegistry, never to a connection, so that one may outlive
// every client (a detached session). Connections attach to it as SessionClients. What it
// needs from the daemon comes in a SessionContext (session_context.h): it can run, and be
// tested, without a Server.
//
// Its stages, each entered through enter() alone, which logs the transition at debug level:
//
//   Starting --exec'd--> Running --the command exited--> Draining --drained, or drain timeout--+
//      |                    |                                                                |
//      |                    +--stop()----------------------------------------------------+   |
//      +--start failed, or stop()---------------------------------------------------> Stopping
//      |                                                                                 |
//      |                                        the backend ended every process: Closing <+
//      +--failed before the backend had anything----------------------------------> Ended <--drained
//
//  - Draining: the command has exited by itself; its last output is read before the backend
//    cleans up what is left of the session.
//  - Stopping: the backend ends every process of the session (at most timeouts.cleanup).
//  - Closing: no process is left; what the terminal still holds is read (at most
//    timeouts.drain), then the session is Ended.
// Clients see four states (State): Draining, Stopping and Closing are all Ending.
//
// Invariants:
//  - The terminal is read into the OutputLog, and every client reads the log at a cursor of
//    its own. Only a bound session (not detached: its controller's disconnect ends it) waits
//    for its controller: reading pauses while the controller is output_buffer_bytes behind.
//    Otherwise nobody slows the program; a reader that falls behind loses the oldest bytes.
//  - Nothing is read from the terminal before the command has exec'd (STARTED precedes
//    every OUTPUT), and the log stops growing before the session is Ended.
//  - The backend is asked to stop the session exactly once (entering Stopping), under the
//    cleanup deadline of its own; a failed cleanup quarantines the session, never the daemon.
//  - The session holds one of the admission's session slots from start() until its
//    processes are gone.
//  - Every client is told once of the start (or its failure) and wakes at every change; a
//    client detaches itself before it goes, and is told when the session goes first.
#pragma once

#include <array>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/event.h"
#include "common/unique_fd.h"
#include "protocol/payloads.h"
#include "server/bulk_priority.h"
#include "server/command_tracker.h"
#include "server/input_watch.h"
#include "server/log_follower.h"
#include "server/output_log.h"
#include "server/screen_subject.h"
#include "server/session_context.h"
#include "server/session_handover.h"
#include "server/session_roles.h"
#include "server/shell_mark.h"

namespace ptyvisor::server {

class Recorder;

// What a session needs from a client attached to it. A client is a LogFollower too: it reads
// the log at a cursor of its own, and is told when the log changes (session_changed).
class SessionClient : public LogFollower {
public:
    void log_changed(ScreenSubject&) final { session_changed(); }
    virtual void session_started() = 0;                             // STARTED may go out
    virtual void session_start_failed(const std::string& why) = 0;  // the command never ran
    virtual void session_changed() = 0;    // the log grew or the session ended: write what is new
    virtual void session_input_room() = 0;  // held input fell below its bound: read the socket again
    virtual void session_gone() = 0;        // the session is destroyed now; forget it
    virtual void session_taken_over() = 0;  // another controller took this one's place
    virtual void control_changed() {}       // a person took the terminal, or handed it back
    // The protocol version the client speaks (a test's client: the newest): whether it can be
    // told that a person holds the terminal (5), or must be let go (2 to 4), or neither (1).
    [[nodiscard]] virtual int protocol_version() const { return 5; }
    // The next offset this client will send: what a bound session waits for.
    [[nodiscard]] virtual std::uint64_t cursor() const = 0;
    // Whether this client relays a real terminal (it answers the program's queries).
    [[nodiscard]] virtual bool has_terminal() const { return false; }

protected:
    ~SessionClient() = default;
};

// A ScreenSubject: what the screen broker sees of it (screen_subject.h).
class Session final : public ScreenSubject {
public:
    enum class State { Starting, Running, Ending, Ended };  // what clients see
    enum class Stage { Starting, Running, Draining, Stopping, Closing, Ended };
    // Observers and waiters at once, besides the controller: each costs the loop work for
    // every byte the session writes, so their number is bounded (systemd-ptybrokerd has 16
    // monitors too). A controller may always attach, by taking over.
    static constexpr std::size_t kMaxReaders = 16;

    // `context` and `owner` outlive the session.
    Session(const SessionContext& context, SessionOwner& owner, std::string unit, bool detached);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Opens the terminal and starts `spec` on it; `starter` is attached as controller.
    // Takes over the admission slot the starter reserved. Returns false with `why` (for the
    // client) when nothing could be started; the session is then Ended.
    bool start(backends::SessionSpec spec, protocol::WindowSize size, SessionClient* starter, pid_t starter_pid,
               std::string& why);

    [[nodiscard]] const std::string& id() const override { return id_; }
    [[nodiscard]] const std::string& unit() const override { return unit_; }
    [[nodiscard]] const std::vector<std::string>& argv() const { return argv_; }
    [[nodiscard]] const std::string& cwd() const { return cwd_; }
    // The sandbox profile it runs under (backends/sandbox_profile.h); empty: none.
    [[nodiscard]] const std::string& profile_name() const { return profile_name_; }
    // What it has cost so far, from its cgroup; nullopt when the backend cannot tell, or once
    // its processes are gone. After the end: the last figures read (the end record's).
    [[nodiscard]] std::optional<backends::SessionUsage> usage() const;
    [[nodiscard]] std::int64_t created() const { return created_; }
    // Whether the terminal flooded in its last input event (see read_terminal): a bulk session.
    [[nodiscard]] bool bulk() const override { return bulk_; }
    // The event priority of a bulk session's work (bulk_priority.h).
    static constexpr std::int64_t kBulkEventPriority = server::kBulkEventPriority;
    // The registry's order of creation (1, 2, ...): `created` has only seconds.
    [[nodiscard]] std::uint64_t sequence() const { return sequence_; }
    void set_sequence(std::uint64_t sequence) { sequence_ = sequence; }
    // LIST's JSON of what never changes once started (protocol::session_fixed_fields), encoded
    // on the first LIST and kept: LIST then costs little per session.
    [[nodiscard]] const std::string& list_fixed_fields() const;
    [[nodiscard]] pid_t starter_pid() const { return starter_pid_; }  // the client that started it
    [[nodiscard]] State state() const;
    [[nodiscard]] Stage stage() const { return stage_; }
    [[nodiscard]] bool started() const { return started_; }
    [[nodiscard]] pid_t main_pid() const { return main_pid_; }
    [[nodiscard]] bool detached() const { return detached_; }
    [[nodiscard]] const OutputLog& log() const override { return *log_; }
    [[nodiscard]] protocol::WindowSize size() const override { return size_; }
    [[nodiscard]] std::uint64_t bytes_in() const { return bytes_in_; }
    // The final status, once Ended (reason included); nullopt before.
    [[nodiscard]] const std::optional<protocol::ExitStatus>& exit_status() const { return final_status_; }
    [[nodiscard]] bool failed_to_start() const { return start_failed_; }
    [[nodiscard]] std::uint64_t ended_usec() const { return ended_usec_; }  // the loop's monotonic clock

    // Clients.
    // As controller, `client` replaces any controller, who is told (session_taken_over).
    void attach(SessionClient* client, Role role);
    // `disconnected`: the client went without a DETACH; a bound session's controller ends it.
    void detach(SessionClient* client, bool disconnected);
    [[nodiscard]] SessionClient* controller() const { return controller_; }
    [[nodiscard]] std::size_t clients() const { return clients_.size(); }
    // Whether one more observer or waiter may attach.
    [[nodiscard]] bool has_reader_room() const { return clients_.size() - (controller_ ? 1 : 0) < kMaxReaders; }
    // The session no longer ends with its controller's connection.
    void make_detached();
    // Drops every client without a word (the server is being destroyed).
    void forget_clients() {
        clients_.clear();
        controller_ = nullptr;
        holder_.reset();
    }

    // A person at the wheel (docs/protocol.md, 12): a supervisor, attached as a reader, holds
    // the terminal; the agent's input, SEND, RESIZE and EXEC are refused meanwhile, and only
    // the holder writes. At most one holder; it lets go when it detaches or disconnects.
    struct Holder {
        SessionClient* client = nullptr;
        std::int64_t uid = 0;
        std::int64_t since_ms = 0;  // Unix ms
        std::uint64_t refused = 0;  // the agent's frames refused while it held
    };
    [[nodiscard]] const Holder* holder() const { return holder_ ? &*holder_ : nullptr; }
    [[nodiscard]] bool held_by(const SessionClient* client) const { return holder_ && holder_->client == client; }
    // Whether a person may take the terminal now: not from a controller of version 1, which
    // has no way to hear it (false with `why`).
    [[nodiscard]] bool may_hold(std::string& why) const;
    // `client` (attached) takes the terminal from the agent, or from another person; may_hold()
    // must be true. A controller of version 2 to 4 cannot be told: it is let go (DETACHED
    // taken_over) and the session no longer ends with it.
    void hold(SessionClient* client, std::int64_t uid);
    // Hands the terminal back to the agent, if `client` holds it.
    void release(SessionClient* client);
    // Counts a frame of the agent's refused because a person holds the terminal (logged, in
    // sum, when it is handed back).
    void count_refused() {
        if (holder_) ++holder_->refused;
    }
    // Whether the session was recorded (server/recording.h): its file outlives the recorder,
    // which goes when the session ends.
    [[nodiscard]] bool recorded() const { return recorded_; }

    // Whether the writer of its input (the controller, or a person holding it) relays a real
    // terminal, which answers the program's queries itself (screen_broker.h: then the screen's
    // answers are not written).
    [[nodiscard]] bool controller_has_terminal() const override {
        if (holder_) return holder_->client->has_terminal();
        return controller_ && controller_->has_terminal();
    }
    // The screen's answers to the program's queries, written to its terminal as input.
    void answer_queries(std::span<const std::uint8_t> bytes) override;

    // Controller actions.
    void write_input(std::span<const std::uint8_t> bytes);
    [[nodiscard]] bool input_full() const;
    bool resize(protocol::WindowSize size);
    // 0, or -ESRCH / -EPERM as backends::SessionProcesses::signal_* say. Each call walks the
    // session's processes (/proc for each member), so its cost is chosen by the client:
    // callers ask signal_wait_usec() first and deliver only when it is 0.
    int signal(const protocol::SignalRequest& request, pid_t& group);
    // How long a signal to this session must wait: after each delivery, kSignalPacing times
    // what it cost, so that signals take at most 1/(1+kSignalPacing) of the loop whatever a
    // client sends (docs/security.md, "SIGNAL flood").
    [[nodiscard]] std::uint64_t signal_wait_usec() const;
    static constexpr std::uint64_t kSignalPacing = 4;
    // Ends the session: STOP, KILL, a bound controller's disconnect or stall, shutdown.
    void stop(protocol::ExitReason reason);

    // A client took output: a paused bound session may read on.
    void client_advanced();


    // Command-aware sessions (docs/protocol.md, section 11).
    // A mark of the session's shell, from the screen worker: its command records and prompt.
    void shell_mark(const ShellMark& mark) override;
    [[nodiscard]] const CommandTracker& commands() const { return commands_; }
    // "bash" or "zsh" when the session was started with shell integration.
    [[nodiscard]] const std::optional<std::string>& shell() const { return shell_; }
    void set_shell(std::string shell) { shell_ = std::move(shell); }
    // The worker has read the log this far (ScreenSubject): the marks before it are known.
    void screen_advanced(std::uint64_t offset) override;
    // Whether the program waits for input: probed while a client asks (input_watch.h). A
    // shell that reports its commands is believed waiting only once the worker has read its
    // output up to where the wait was seen: else a command that has just ended, whose end mark
    // is still unread, would look like a command waiting (its shell is, at its next prompt).
    [[nodiscard]] bool waiting_for_input() const;
    [[nodiscard]] InputWatch& input_watch() { return input_watch_; }
    [[nodiscard]] const InputWatch& input_watch() const { return input_watch_; }
    // One EXEC at a time: the connection running one holds this until it answers.
    [[nodiscard]] bool exec_running() const { return exec_running_; }
    void set_exec_running(bool running) { exec_running_ = running; }

    // Handover (server/session_handover.h, server_handover.cpp).
    // Whether the session can be handed over now: Running (not starting, not ending).
    [[nodiscard]] bool can_hand_over() const;
    [[nodiscard]] HandoverRecord handover_record() const;
    [[nodiscard]] int terminal_fd() const { return master_.get(); }
    // Takes back a session an earlier run handed over: Running, with no client; a bound one
    // waits timeouts.reattach for its controller and then ends as at a disconnect. False
    // with `why` when the backend does not recognise it (nothing is then owned).
    bool adopt(const HandoverRecord& record, UniqueFd master, std::unique_ptr<OutputLog> log, std::string& why);
    // With the service manager's fd store in use (Server::fd_store()): the session's
    // descriptors go there once it runs, its metadata again when it changes, and all leave
    // when it ends.
    void store_for_handover(bool replace);
    void unstore_for_handover();

private:
    void on_started(pid_t pid);
    void on_start_failed(const std::string& why);
    void on_exited(protocol::ExitStatus status);
    void on_terminal(std::uint32_t revents);
    // Drained: what the line discipline holds now (an input event). End: until EAGAIN or the
    // end of the terminal (a hang-up, the command's exit, a drain).
    enum class ReadUntil { Drained, End };
    void read_terminal(ReadUntil until = ReadUntil::End);
    // Moves the terminal's source behind the interactive ones (a flood) or back, and counts
    // the bulk terminals of the process.
    void set_bulk(bool bulk);
    void write_held_input();
    void update_terminal_events();
    [[nodiscard]] bool paused_for_controller() const;
    void stop_backend();
    void on_stopped(bool ok, const std::string& why);
    void start_drain_timer();
    void start_limit_timers();
    void on_idle_timer();
    void keep_final_usage();
    void maybe_finish();
    void finish(protocol::ExitStatus status);
    void release_slot();
    void notify_changed();
    // Wakes the clients only: what changed is not the log (a mark, an input wait).
    void notify_clients();
    // Tells every LogFollower of the session, in one order: the screen broker, the recorder,
    // then the clients (a copy of the list: a client may detach while it is told).
    template <class F>
    void tell(F f);
    // The followers that are not clients: those told of every byte as it is read.
    [[nodiscard]] std::array<LogFollower*, 2> byte_followers() const;
    // The one place the stage changes: checks that `next` may follow, logs it at debug level,
    // and does what entering `next` means.
    void enter(Stage next);
    [[nodiscard]] bool ending() const { return stage_ >= Stage::Draining; }
    // Whether every byte the terminal will give has been read, or need not be waited for.
    [[nodiscard]] bool drained() const;
    template <class F>
    auto guarded(const char* where, F f);

    void log_control_end();
    void tell_control_changed();

    const SessionContext& context_;
    SessionOwner& owner_;
    std::string unit_, id_;
    std::vector<std::string> argv_;
    std::string cwd_;
    std::int64_t created_ = 0;
    mutable std::string list_fixed_fields_;
    std::uint64_t sequence_ = 0;
    pid_t starter_pid_ = 0;
    bool detached_;
    Stage stage_ = Stage::Starting;

    CommandTracker commands_;
    std::optional<std::string> shell_;
    InputWatch input_watch_;
    std::uint64_t screen_read_to_ = 0;  // screen_advanced
    bool exec_running_ = false;

    std::unique_ptr<OutputLog> log_;
    std::unique_ptr<Recorder> recorder_;  // when sessions are recorded (server/recording.h)
    bool recorded_ = false;               // a recorder was started
    UniqueFd master_;
    EventSource terminal_source_, drain_timer_;
    EventSource reattach_timer_;  // an adopted bound session waits for its controller
    std::unique_ptr<backends::SessionProcesses> processes_;
    // The profile's limits that the server enforces, the same on every backend.
    std::string profile_name_;
    std::optional<std::chrono::seconds> runtime_max_, idle_timeout_;
    EventSource runtime_timer_, idle_timer_;
    std::uint64_t last_activity_usec_ = 0;  // output read or input written (idle_timeout)
    std::optional<backends::SessionUsage> final_usage_;  // read as it ended
    // usage() reads a few cgroup files: a LIST of many sessions reads each at most once a second.
    mutable std::optional<backends::SessionUsage> cached_usage_;
    mutable std::uint64_t cached_usage_usec_ = 0;
    protocol::WindowSize size_;
    pid_t main_pid_ = 0;
    bool holds_slot_ = false;
    bool stored_ = false;  // in the fd store

    std::vector<std::pair<SessionClient*, Role>> clients_;
    SessionClient* controller_ = nullptr;
    std::optional<Holder> holder_;

    std::vector<std::uint8_t> held_input_;
    std::uint64_t bytes_in_ = 0;
    std::uint64_t signal_ready_usec_ = 0;  // CLOCK_MONOTONIC: when the next signal may go

    // Facts, not stages: what has happened, whatever the stage.
    bool started_ = false;             // the command exec'd (or was adopted running)
    bool start_failed_ = false;        // it never ran
    bool stop_after_start_ = false;    // a STOP came while Starting: it follows STARTED
    bool exited_ = false;              // the backend reported the main process's end
    bool terminal_closed_ = false;     // the terminal gave its last byte (or was lost)
    bool drain_expired_ = false;       // timeouts.drain passed while Draining or Closing
    bool bulk_ = false;  // the terminal's source is at the bulk priority (see read_terminal)
    std::uint32_t terminal_events_ = UINT32_MAX;  // what the terminal's source waits for; none yet
    protocol::ExitReason reason_ = protocol::ExitReason::Exited;
    protocol::ExitStatus exit_status_;
    std::optional<protocol::ExitStatus> final_status_;
    std::uint64_t ended_usec_ = 0;
};

}  // namespace ptyvisor::server
