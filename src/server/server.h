// Server: the listener, admission and every connection, on one sd-event loop.
//
// It starts in two steps: init() puts in place everything serving depends on, and fails
// (logged, negative errno) if any of it cannot be had; only then does serve() run the loop.
// In particular a daemon without its SIGTERM handler never serves: with SIGTERM blocked
// (main.cpp), only SIGKILL could stop it, and no session would be cleaned up.
//
// It stops on SIGTERM or SIGINT: stop accepting, end every session with reason shutdown, wait
// for each cleanup, exit 0. A cleanup that fails does not stop it: one process the kernel
// cannot kill yet must not stop the daemon, nor every later start. The session is
// quarantined (Session::on_stopped) and the next start cleans up what is left.
#pragma once

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/event.h"
#include "common/unique_fd.h"
#include "protocol/payloads.h"
#include "server/admission.h"
#include "server/audit_log.h"
#include "server/blocking_worker.h"
#include "server/config.h"
#include "server/connection.h"
#include "server/recording.h"
#include "server/reply_budget.h"
#include "server/session_handover.h"
#include "server/screen_broker.h"
#include "server/session_registry.h"

namespace ptyvisor::server {

class Server {
public:
    Server(Config config, backends::Account account, std::unique_ptr<backends::Backend> backend,
           sd_event* event);
    ~Server();

    // Watches `listener` (non-blocking), installs the SIGTERM, SIGINT and SIGHUP handlers
    // (the three must be blocked in the calling thread, and stay blocked in every thread),
    // the worker's completions, the reaper of closed connections and the watchdog, opens the
    // recordings directory when one is configured, and makes sure random bytes can be read
    // for unit names. Returns 0, or a negative errno after logging which of these failed.
    // Accepts no client yet.
    int init(UniqueFd listener);

    // After init() succeeded: serves until shutdown; returns the process exit code.
    int serve();

    // For connections.
    [[nodiscard]] sd_event* event() const { return event_; }
    [[nodiscard]] const Config& config() const { return config_; }
    [[nodiscard]] const backends::Account& account() const { return account_; }
    backends::Backend& backend() { return *backend_; }
    Admission& admission() { return admission_; }
    BlockingWorker& worker() { return worker_; }
    SessionRegistry& sessions() { return sessions_; }
    Recordings& recordings() { return recordings_; }
    AuditLog& audit() { return audit_; }
    ScreenBroker& screens() { return screens_; }
    ReplyBudget& replies() { return replies_; }
    // Whether the peer is a member of the configured observer group.
    [[nodiscard]] bool in_observer_group(const PeerIdentity& peer) const;
    [[nodiscard]] bool in_supervisor_group(const PeerIdentity& peer) const;
    // A session went: the daemon may be done stopping.
    void sessions_changed() { maybe_exit(); }
    // The group of session terminals, looked up once (pty.h).
    [[nodiscard]] gid_t terminal_group() const { return terminal_group_; }
    [[nodiscard]] bool shutting_down() const { return shutting_down_; }
    std::uint64_t next_serial() { return ++serial_; }
    // "<unit_prefix>-<32 hex digits>.service", from 16 random bytes. Cannot fail once init()
    // has succeeded (it read random bytes: see random_bytes() in server.cpp).
    std::string new_unit_name() const;
    // The STATUS reply (docs/protocol.md 5.7), and its payload.
    [[nodiscard]] protocol::StatusReply status() const;
    std::string status_json() const;
    // The connection is closed; destroy it on the next loop iteration.
    void retire(Connection* connection);

    // Handover (server_handover.cpp; server/session_handover.h).
    // What SIGHUP re-execs, with which arguments; an empty binary: SIGHUP is only logged.
    void set_reexec(std::string binary, std::vector<std::string> argv) {
        reexec_binary_ = std::move(binary);
        reexec_argv_ = std::move(argv);
    }
    // Takes back the sessions an earlier run handed over, before init(); what cannot be
    // taken back is closed and logged (cleanup_orphans() then ends its processes).
    // Returns how many were taken back.
    std::size_t adopt(HandedOver& handed);
    // Whether running sessions are kept in the service manager's fd store: then SIGTERM
    // leaves them running for the next start instead of ending them (docs/operations.md).
    void set_fd_store(bool on) { session_context_.fd_store = on; }
    [[nodiscard]] bool fd_store() const { return session_context_.fd_store; }

private:
    int add_signal(EventSource& out, int signal, sd_event_signal_handler_t handler);
    void on_accept();
    void accept_one(UniqueFd socket);
    void reject(UniqueFd socket, protocol::ErrorCode code, std::string message);
    void dispose_refused();
    void evict_for_fairness(pid_t victim);
    void pause_accepting(int error);
    void resume_accepting();
    void begin_shutdown();
    void schedule_reap();
    void reap();
    void maybe_exit();
    void on_hangup();
    void try_reexec();

    Config config_;
    backends::Account account_;
    std::unique_ptr<backends::Backend> backend_;
    sd_event* event_;
    Admission admission_;
    // Declared before the connections: they hand it what they close, to their last one.
    BlockingWorker worker_;
    UniqueFd listener_;
    // The sockets refused during one accept batch, closed on the worker together when the
    // batch ends: one job (and one wake-up of a worker thread) per batch, not per refusal.
    // A peer refused at accept, to be answered and closed on the worker (dispose_refused).
    struct Refusal {
        UniqueFd socket;
        protocol::ErrorCode code;
        std::string message;
    };
    std::vector<Refusal> refused_;
    ReplyBudget replies_;
    // While accepting is paused (pause_accepting): the timer that ends the pause.
    bool accept_paused_ = false;
    bool accept_pause_logged_ = false;  // since the listen queue was last found empty
    EventSource accept_retry_timer_;
    EventSource accept_source_, sigterm_source_, sigint_source_, sighup_source_, reap_source_, watchdog_source_;
    // Outlives the sessions, whose recorders tell it when they close.
    Recordings recordings_;
    AuditLog audit_;
    // Outlives the sessions, which tell it when they go.
    ScreenBroker screens_{event_, screen_broker_options(config_.screen), [this] { return shutting_down_; }};
    // What every session runs with (filled in by the constructor): outlives them.
    SessionContext session_context_;
    // Sessions outlive connections; the connections, declared after, go first.
    SessionRegistry sessions_{session_context_, RegistryHooks{[this] { return new_unit_name(); },
                                                              [this] { sessions_changed(); },
                                                              [this] { return shutting_down_; }}};
    std::map<Connection*, std::unique_ptr<Connection>> connections_;
    std::vector<std::unique_ptr<Connection>> retired_;
    std::uint64_t serial_ = 0;
    gid_t terminal_group_;
    static bool in_group(const PeerIdentity& peer, const std::optional<gid_t>& group);
    std::optional<gid_t> observer_group_;
    std::optional<gid_t> supervisor_group_;
    bool shutting_down_ = false;
    std::string reexec_binary_;
    std::vector<std::string> reexec_argv_;
    bool reexec_pending_ = false;
    int reexec_worker_waits_ = 0;  // retries while the blocking worker has jobs
    int reexec_session_waits_ = 0;  // retries while a session is starting or ending
    void exit_keeping_sessions();
    EventSource reexec_timer_;
};

}  // namespace ptyvisor::server
