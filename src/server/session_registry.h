// SessionRegistry: every session of the daemon, by id, and when each goes.
//
// It needs no Server: the SessionContext its sessions run with, and three hooks
// (RegistryHooks). session_registry_test.cpp runs it alone.
//
// A session stays while it runs. Once Ended it stays while a client is attached (to read
// its last output and its EXIT); a detached one then stays for the retention time, so that
// a late reader still finds its status and log. At most max_sessions ended ones are kept,
// readers or not (the oldest go first, and their readers are told); only a controller still
// taking its EXIT holds one past that. Sessions are destroyed on a later loop iteration, never
// inside one of their own callbacks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/event.h"
#include "server/session.h"

namespace ptyvisor::server {

// What the registry asks of whoever owns it.
struct RegistryHooks {
    std::function<std::string()> new_unit_name;  // a fresh, unique unit name
    std::function<void()> sessions_changed;      // a session was destroyed
    std::function<bool()> shutting_down;         // then ended sessions are not kept
};

class SessionRegistry final : public SessionOwner {
public:
    // `context` outlives the registry; its config gives max_sessions and the retention.
    SessionRegistry(const SessionContext& context, RegistryHooks hooks)
        : context_(context), hooks_(std::move(hooks)) {}
    ~SessionRegistry();

    // A new session, not yet started, under a fresh unit name.
    Session& create(bool detached);
    // A session taken back from an earlier run (Session::adopt succeeded).
    void insert_adopted(std::unique_ptr<Session> session);
    [[nodiscard]] Session* find(const std::string& id) const;
    // Oldest first (in the order they were created).
    [[nodiscard]] std::vector<const Session*> all() const;
    [[nodiscard]] std::vector<Session*> all_mutable() const;
    [[nodiscard]] std::size_t running() const;
    [[nodiscard]] bool empty() const { return sessions_.empty(); }
    // Where the next LIST's input probes begin (Connection::handle_list): LISTs take turns
    // through the sessions, so that each probes a bounded number and all are probed in turn.
    std::size_t list_probe_cursor = 0;

    // SessionOwner: it is Ended now.
    void session_ended(Session& session) override { review(&session); }
    // A client left: an ended session may go now.
    void client_left(Session* session);
    // The daemon stops: every session ends with reason shutdown.
    void shut_down();
    // The server is being destroyed: sessions forget their clients, without telling them.
    void forget_clients();

private:
    void review(Session* session);
    void bound_ended();
    void schedule_reap();
    void reap();
    void expire();
    void arm_expiry();

    const SessionContext& context_;
    RegistryHooks hooks_;
    std::map<std::string, std::unique_ptr<Session>> sessions_;  // by id
    std::vector<std::unique_ptr<Session>> doomed_;
    std::uint64_t created_count_ = 0;
    EventSource reap_source_, expiry_timer_;
};

}  // namespace ptyvisor::server
