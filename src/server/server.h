// Server: the listener, admission and every connection, on one sd-event loop.
//
// It stops in one of two ways. SIGTERM or SIGINT: stop accepting, end every session with
// reason shutdown, wait for each cleanup, exit 0. A cleanup failure: fail closed, as the
// pilot did (log, close the listener and every connection, exit non-zero) so that the
// service manager restarts us and CleanupOrphans runs again.
#pragma once

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/event.h"
#include "common/unique_fd.h"
#include "server/admission.h"
#include "server/blocking_worker.h"
#include "server/config.h"
#include "server/connection.h"
#include "server/session_registry.h"

namespace ptyvisor::server {

class Server {
public:
    Server(Config config, backends::Account account, std::unique_ptr<backends::Backend> backend,
           sd_event* event);
    ~Server();

    // Serves until shutdown; returns the process exit code.
    int serve(UniqueFd listener);

    // For connections.
    [[nodiscard]] sd_event* event() const { return event_; }
    [[nodiscard]] const Config& config() const { return config_; }
    [[nodiscard]] const backends::Account& account() const { return account_; }
    backends::Backend& backend() { return *backend_; }
    Admission& admission() { return admission_; }
    BlockingWorker& worker() { return worker_; }
    SessionRegistry& sessions() { return sessions_; }
    // Whether the peer is a member of the configured observer group.
    [[nodiscard]] bool in_observer_group(const PeerIdentity& peer) const;
    // A session went: the daemon may be done stopping.
    void sessions_changed() { maybe_exit(); }
    // The group of session terminals, looked up once (pty.h).
    [[nodiscard]] gid_t terminal_group() const { return terminal_group_; }
    [[nodiscard]] bool shutting_down() const { return shutting_down_; }
    std::uint64_t next_serial() { return ++serial_; }
    std::string new_unit_name() const;
    std::string status_json() const;
    // The connection is closed; destroy it on the next loop iteration.
    void retire(Connection* connection);
    void fail_closed(const std::string& why);

private:
    void on_accept();
    void accept_one(UniqueFd socket);
    void reject(UniqueFd socket, protocol::ErrorCode code, const std::string& message);
    void evict_for_fairness(pid_t victim);
    void begin_shutdown();
    void reap_retired();
    void maybe_exit();

    Config config_;
    backends::Account account_;
    std::unique_ptr<backends::Backend> backend_;
    sd_event* event_;
    Admission admission_;
    // Declared before the connections: they hand it what they close, to their last one.
    BlockingWorker worker_;
    UniqueFd listener_;
    EventSource accept_source_, sigterm_source_, sigint_source_, sighup_source_, reap_source_, watchdog_source_;
    // Sessions outlive connections; the connections, declared after, go first.
    SessionRegistry sessions_{*this};
    std::map<Connection*, std::unique_ptr<Connection>> connections_;
    std::vector<std::unique_ptr<Connection>> retired_;
    std::uint64_t serial_ = 0;
    gid_t terminal_group_;
    std::optional<gid_t> observer_group_;
    bool shutting_down_ = false;
    bool failed_ = false;
};

}  // namespace ptyvisor::server
