// SessionStarter: one START, from its decoded request to a started Session, or to the one
// error that refuses it. Every check a START must pass, and every resource it takes, is here
// and nowhere else, in this order:
//  1. the peer is the agent's account;
//  2. on a worker thread with the agent's file-system identity (a path the agent names may
//     sit on a FUSE mount it serves and never answers): the descriptor is a directory, the
//     one the request names (st_dev, st_ino), and the backend's resolver finds the command;
//  3. right before the start, on the loop: the peer is still alive and allowed (a backend
//     Unsure of it rechecks once), is not traced, and its resource limits are read: the
//     session gets them, never the daemon's;
//  4. a session slot and an admission token are taken, and the session is created and
//     started with the connection as its controller.
//
// Invariants:
//  - While a worker or the backend answers, waiting() is true: the connection reads nothing
//    more from its client, so later frames keep their order behind START.
//  - The session slot is the starter's from step 4 until Session::start() takes it; a
//    starter abandoned before gives it back.
//  - The directory is held until the backend's start() has returned, and is closed on a
//    worker, never on the loop; abandon() hands it (and a check still running) to the caller,
//    who closes it before the client can see its ERROR.
//  - Exactly one of the callbacks `refused` and `started` ends a START that was not
//    abandoned; `attached` precedes Session::start(), so that the connection knows its
//    session before the session can call it back.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/unique_fd.h"
#include "protocol/error_code.h"
#include "protocol/payloads.h"
#include "server/admission.h"
#include "server/blocking_worker.h"
#include "server/config.h"
#include "server/peer.h"

namespace ptyvisor::server {

class AuditLog;

class Session;
class SessionClient;
class SessionRegistry;

class SessionStarter {
public:
    // What a start needs from the daemon; every pointer outlives the starter.
    struct Context {
        sd_event* event = nullptr;
        const Config* config = nullptr;
        const backends::Account* account = nullptr;
        backends::Backend* backend = nullptr;
        Admission* admission = nullptr;
        BlockingWorker* worker = nullptr;
        SessionRegistry* sessions = nullptr;
        AuditLog* audit = nullptr;  // optional
    };
    struct Callbacks {
        std::function<void(protocol::ErrorCode, const std::string&)> refused;
        std::function<void(Session&)> attached;  // created; its start() follows at once
        std::function<void(Session&)> started;   // start() succeeded: STARTED will follow
        std::function<void()> answered;          // a worker or the backend answered: read on
    };
    // What abandon() leaves to close on a worker.
    struct Leftovers {
        std::vector<UniqueFd> fds;
        std::shared_ptr<void> check;  // a check that may still run on a worker
    };

    SessionStarter(Context context, const PeerIdentity& peer, SessionClient& controller, Callbacks callbacks);
    ~SessionStarter();
    SessionStarter(const SessionStarter&) = delete;
    SessionStarter& operator=(const SessionStarter&) = delete;

    // Step 1: whether `peer` is the agent's account. The caller asks before it decodes the
    // START, so that another account learns nothing about what it sent.
    static bool may_start(const PeerIdentity& peer, const backends::Account& account);
    // Steps 2 to 4, for a peer that may_start(): starts the checks for `request`, whose
    // directory is `cwd`. `detach`: the session outlives its controller's connection.
    // `shell_integration`: the request's, already checked (integrate_shell accepts its argv).
    // `profile` was chosen and checked (profile_choice.h); nullopt: none.
    void begin(protocol::StartRequest request, UniqueFd cwd, bool detach, bool shell_integration,
               std::optional<backends::SandboxProfile> profile = std::nullopt);
    [[nodiscard]] bool waiting() const { return checking_ != nullptr || rechecking_ != nullptr; }
    // The handshake deadline passed while waiting(): the error that says what did not answer.
    [[nodiscard]] protocol::ErrorCode timeout_code() const;
    [[nodiscard]] std::string timeout_message() const;
    // Stops wherever it is: no callback runs any more, the slot is given back, and what
    // must be closed off the loop is moved to `out`.
    void abandon(Leftovers& out);

private:
    struct Check;
    void on_checked();
    void authorize(bool rechecked);
    void on_rechecked();
    void count_admission_wait();  // a recheck was answered or abandoned (metrics)
    void start();
    template <class F>
    auto answered(F f);

    Context context_;
    const PeerIdentity& peer_;
    SessionClient& controller_;
    Callbacks callbacks_;
    protocol::WindowSize size_;
    bool detach_ = false;
    std::string shell_;  // "bash" or "zsh" when started with shell integration
    UniqueFd cwd_;
    std::optional<backends::SessionSpec> spec_;
    std::vector<std::string> env_names_;  // what the START set, for the audit (never values)
    std::string rule_;                    // the policy's rule that allowed it ("FILE:LINE", "default")
    void audit_start(const std::string& session, const std::string& decision, const std::string& reason);
    std::shared_ptr<Check> check_;
    std::shared_ptr<BlockingWorker::Completion> checking_;
    std::shared_ptr<std::function<void()>> rechecking_;
    std::uint64_t recheck_began_usec_ = 0;  // the loop's monotonic clock
    bool holds_slot_ = false;
};

}  // namespace ptyvisor::server
