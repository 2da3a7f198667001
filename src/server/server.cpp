#include "server/server.h"

#include <unistd.h>

#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include <grp.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <span>

#include "common/log.h"
#include "protocol/frame.h"
#include "common/linux.h"
#include "common/private_directory.h"
#include "common/process.h"
#include "server/pty.h"

namespace ptyvisor::server {

using protocol::ErrorCode;

namespace {

// Jobs the worker may have pending before the agent's new connections are refused. In
// normal operation it holds a handful (each closes in microseconds).
constexpr std::size_t kMaxWorkerBacklog = 256;

// How long accepting stays paused at most after accept4() ran out of descriptors or memory.
constexpr std::uint64_t kAcceptRetryUsec = 100'000;

std::optional<gid_t> group_id(const std::string& name) {
    std::vector<char> buffer(16384);
    group g{};
    group* found = nullptr;
    if (::getgrnam_r(name.c_str(), &g, buffer.data(), buffer.size(), &found) != 0 || !found) return std::nullopt;
    return found->gr_gid;
}

// Whether the "Groups:" line of a /proc/PID/status text lists `gid`.
bool has_supplementary_group(std::string_view status, gid_t gid) {
    const auto at = status.find("\nGroups:");
    if (at == std::string_view::npos) return false;
    auto line = status.substr(at + 8);
    line = line.substr(0, line.find('\n'));
    const std::string wanted = std::to_string(gid);
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        std::size_t j = i;
        while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
        if (j > i && line.substr(i, j - i) == wanted) return true;
        i = j;
    }
    return false;
}

constexpr std::size_t kUnitNameRandomBytes = 16;

// Fills `buffer` from the kernel's random source. Returns 0 or a negative errno. The first
// call waits until the source is seeded; from then on getrandom(2) fills up to 256 bytes in
// one call and is never interrupted, so once a call has succeeded (init()), none fails.
int random_bytes(std::span<unsigned char> buffer) {
    while (!buffer.empty()) {
        const ssize_t n = ::getrandom(buffer.data(), buffer.size(), 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        buffer = buffer.subspan(static_cast<std::size_t>(n));
    }
    return 0;
}

}  // namespace

Server::Server(Config config, backends::Account account, std::unique_ptr<backends::Backend> backend,
               sd_event* event)
    : config_(std::move(config)),
      account_(std::move(account)),
      backend_(std::move(backend)),
      event_(event),
      admission_(config_.limits),
      worker_(event, {account_.uid, account_.gid, account_.groups}),
      recordings_(config_.recording, event),
      terminal_group_(server::terminal_group(account_.gid)),
      observer_group_(config_.observer_group.empty() ? std::nullopt : group_id(config_.observer_group)),
      supervisor_group_(config_.supervisor_group.empty() ? std::nullopt : group_id(config_.supervisor_group)) {
    if (!config_.observer_group.empty() && !observer_group_)
        log_warning("observer group not found; only root may observe", {{"GROUP", config_.observer_group}});
    if (!config_.supervisor_group.empty() && !supervisor_group_)
        log_warning("supervisor group not found; only root may supervise", {{"GROUP", config_.supervisor_group}});
    session_context_.event = event_;
    session_context_.config = &config_;
    session_context_.agent_uid = account_.uid;
    session_context_.terminal_group = terminal_group_;
    session_context_.admission = &admission_;
    session_context_.backend = backend_.get();
    session_context_.recordings = &recordings_;
    session_context_.audit = &audit_;
    session_context_.screens = &screens_;
}

bool Server::in_observer_group(const PeerIdentity& peer) const { return in_group(peer, observer_group_); }
bool Server::in_supervisor_group(const PeerIdentity& peer) const { return in_group(peer, supervisor_group_); }

bool Server::in_group(const PeerIdentity& peer, const std::optional<gid_t>& group) {
    if (!group || peer.cred.uid == 0) return false;
    if (peer.cred.gid == *group) return true;
    // The supplementary groups, read from /proc and confirmed by the pidfd to be the peer's.
    const auto status = read_small_file("/proc/" + std::to_string(peer.cred.pid) + "/status");
    if (!status || !pidfd_alive(peer.pidfd.get())) return false;
    return has_supplementary_group(*status, *group);
}

Server::~Server() {
    // Sessions and connections point at each other: untie them without callbacks, then
    // connections go first, then (as a member) the registry and its sessions, whose
    // processes are left to the next run's cleanup_orphans() (backend.h).
    sessions_.forget_clients();
    for (const auto& [raw, c] : connections_) c->forget_session();
    for (const auto& c : retired_) c->forget_session();
    connections_.clear();
    retired_.clear();
}

int Server::add_signal(EventSource& out, int signal, sd_event_signal_handler_t handler) {
    sd_event_source* s = nullptr;
    const int r = sd_event_add_signal(event_, &s, signal, handler, this);
    if (r < 0) {
        // -EBUSY: the signal is not blocked in this thread (main.cpp blocks it).
        return log_error_errno(r, std::string("cannot install the SIG") + sigabbrev_np(signal) +
                                      " handler; refusing to run without it");
    }
    (void)sd_event_source_set_description(s, (std::string("SIG") + sigabbrev_np(signal)).c_str());
    out.reset(s);
    return 0;
}

int Server::init(UniqueFd listener) {
    unsigned char probe[kUnitNameRandomBytes];
    if (const int r = random_bytes(probe); r < 0) return log_error_errno(r, "cannot read random bytes for unit names");

    auto on_stop = [](sd_event_source*, const signalfd_siginfo*, void* self) {
        static_cast<Server*>(self)->begin_shutdown();
        return 0;
    };
    // SIGHUP: re-exec, keeping the sessions (server_handover.cpp), where that is possible.
    auto on_hangup = [](sd_event_source*, const signalfd_siginfo*, void* self) {
        static_cast<Server*>(self)->on_hangup();
        return 0;
    };
    if (int r = add_signal(sigterm_source_, SIGTERM, on_stop); r < 0) return r;
    if (int r = add_signal(sigint_source_, SIGINT, on_stop); r < 0) return r;
    if (int r = add_signal(sighup_source_, SIGHUP, on_hangup); r < 0) return r;

    if (const int r = worker_.init(); r < 0) return log_error_errno(r, "cannot watch the worker's completions");
    // Created now, off, so that retiring a connection or failing closed only has to enable it.
    if (const int r = add_defer(event_, reap_source_, [this] { reap(); }); r < 0)
        return log_error_errno(r, "cannot create the reaper of closed connections");
    if (const int r = sd_event_source_set_enabled(reap_source_.get(), SD_EVENT_OFF); r < 0)
        return log_error_errno(r, "cannot create the reaper of closed connections");
    // sd-event pings the service manager's watchdog itself when WATCHDOG_USEC is set.
    if (const int r = sd_event_set_watchdog(event_, 1); r < 0) return log_error_errno(r, "cannot enable the watchdog");

    // The administrator asked for every session to be recorded: none runs unrecorded for
    // want of the directory.
    if (const int r = recordings_.init(); r < 0) {
        log_error("cannot record sessions; refusing to run without recording",
                  {{"DIRECTORY", config_.recording.directory}, {"ERROR", private_directory_error(r)}});
        return r;
    }

    // Every act on record (docs/policy.md): the journal, else a file in the state directory.
    // An audit that silently records nothing is worse than none: the daemon does not run.
    AuditLog::Options audit_options;
    audit_options.directory = config_.state_directory;
    if (config_.audit_sink == "file") audit_options.journal_socket.clear();  // never the journal
    if (config_.audit_sink == "journal" && ::access(audit_options.journal_socket.c_str(), F_OK) != 0) {
        log_error("[audit] sink = \"journal\", but no journald listens; refusing to run without the audit",
                  {{"SOCKET", audit_options.journal_socket}});
        return -ENOENT;
    }
    std::string audit_why;
    if (const int r = audit_.open(audit_options, audit_why); r < 0) {
        log_error("cannot keep the audit log; refusing to run without it", {{"ERROR", audit_why}});
        return r;
    }

    // The screen worker: sessions run without it if it cannot start (it is retried).
    screens_.start();

    listener_ = std::move(listener);
    if (const int r = add_io(event_, accept_source_, listener_.get(), EPOLLIN, [this](std::uint32_t) { on_accept(); });
        r < 0)
        return log_error_errno(r, "cannot watch the listener", {{"SOCKET", config_.socket}});
    return 0;
}

int Server::serve() {
    // Best effort, as systemd's own daemons: without a service manager these do nothing.
    sd_notifyf(0, "READY=1\nSTATUS=Serving on %s with the %s backend", config_.socket.c_str(),
               std::string(backend_->name()).c_str());
    log_info("listening", {{"SOCKET", config_.socket}, {"BACKEND", std::string(backend_->name())}});
    const int r = sd_event_loop(event_);
    sd_notify(0, "STOPPING=1");
    if (r < 0) {
        log_error_errno(r, "the event loop failed");
        return 1;
    }
    return r;
}

void Server::on_accept() {
    // A bounded batch per wakeup keeps one flood from starving established sessions.
    for (int i = 0; i < 64; ++i) {
        UniqueFd socket(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!socket) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) pause_accepting(errno);
            else if (errno == EAGAIN && accept_pause_logged_) {
                // The queue is empty again: the episode is over.
                accept_pause_logged_ = false;
                log_info("accept resumed: the listen queue is empty");
            }
            break;
        }
        try {
            accept_one(std::move(socket));
        } catch (const std::exception& e) {
            // Allocation failures only (nothing here throws otherwise): one client's failure
            // ends its connection (the socket went with the exception), never the daemon.
            log_error("cannot accept a connection", {{"ERROR", e.what()}});
        }
    }
    dispose_refused();
}

void Server::dispose_refused() {
    if (refused_.empty()) return;
    // Each refused peer gets its ERROR frame and its close on a worker: the loop only
    // accepts and judges, which is what the agent's connection waits for in the listen queue.
    auto batch = std::make_shared<std::vector<Refusal>>(std::move(refused_));
    refused_.clear();
    worker_.submit([batch] {
        for (Refusal& r : *batch) {
            const auto frame = protocol::encode_frame(protocol::FrameType::Error,
                                                      protocol::encode(protocol::ErrorReply{r.code, r.message}));
            // A fresh socket's send buffer is empty, so this small frame fits; never wait for it.
            [[maybe_unused]] const auto n =
                ::send(r.socket.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            r.socket.reset();
        }
    });
}

// Out of descriptors or memory: stop accepting, instead of spinning on a listener that stays
// readable, and try again when a connection closes or kAcceptRetryUsec has passed, whichever
// is first. The timer is what ends the pause when no connection was holding the descriptors
// (refused sockets waiting for the worker's close, a session's log): without it, accepting
// stayed off for good after a flood of refused connections (docs/security.md, "Accept
// paused for good").
void Server::pause_accepting(int error) {
    // Logged once per episode: under a flood it pauses ten times a second.
    if (!accept_pause_logged_) log_warning("accept paused", {{"ERROR", std::strerror(error)}});
    accept_pause_logged_ = true;
    if (const int r = sd_event_source_set_enabled(accept_source_.get(), SD_EVENT_OFF); r < 0)
        log_error_errno(r, "cannot pause accepting");
    accept_paused_ = true;
    if (const int r = rearm_timer(event_, accept_retry_timer_, kAcceptRetryUsec, [this] { resume_accepting(); }); r < 0) {
        // Without the timer, a pause could last for ever: keep accepting, and spin instead.
        log_error_errno(r, "cannot arm the accept retry timer; accepting stays on");
        resume_accepting();
    }
}

void Server::resume_accepting() {
    if (!accept_source_ || shutting_down_ || !accept_paused_) return;
    accept_paused_ = false;
    accept_retry_timer_.reset();
    if (const int r = sd_event_source_set_enabled(accept_source_.get(), SD_EVENT_ON); r < 0) {
        log_error_errno(r, "cannot resume accepting; trying again shortly");
        accept_paused_ = true;
        rearm_timer(event_, accept_retry_timer_, kAcceptRetryUsec, [this] { resume_accepting(); });
        return;
    }
}

void Server::reject(UniqueFd socket, ErrorCode code, std::string message) {
    admission_.count_rejected(code);
    // Answered and closed on a worker, with the rest of this accept batch's refusals
    // (dispose_refused): its queue may already hold descriptors the client sent.
    refused_.push_back(Refusal{std::move(socket), code, std::move(message)});
}

void Server::accept_one(UniqueFd socket) {
    if (shutting_down_) return reject(std::move(socket), ErrorCode::ShuttingDown, "the daemon is stopping");
    // A peer that hung up before saying a word (a connect-and-close flood, whose connections
    // wait in the listen queue long enough for that) is dropped unanswered: it can read no
    // ERROR, and nothing it could have sent is left. One recv() instead of a pidfd, a cgroup
    // read and a connection. Counted apart (STATUS `hung_up`): it never reached admission, and
    // an operator should still see a flood of them. It is closed here, on the loop, not on the
    // worker: with nothing queued and its peer gone, no descriptor can be in flight in it, so
    // its close cannot block; and a flood of them, each held until the worker's close, ran the
    // daemon out of descriptors and drained the listen queue at a few hundred a second.
    if (char byte = 0; ::recv(socket.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
        ++admission_.counters().hung_up;
        socket.reset();
        return;
    }
    PeerIdentity peer;
    if (const int r = read_peer_credentials(socket.get(), peer); r < 0)
        return reject(std::move(socket), ErrorCode::NotAllowed, std::string("cannot identify the peer: ") + std::strerror(-r));
    // A process holding all its handshakes is refused below whatever else is true of it:
    // refuse it now, before a pidfd and a read of its cgroup. Under a flood from a few
    // processes this is most connections, and every one of them delays the agent, whose
    // connection waits behind them in the listen queue (listener.h).
    if (admission_.holds_all_its_handshakes(peer.cred.pid))
        return reject(std::move(socket), ErrorCode::Overloaded, "too many connections are waiting for START");
    // Likewise, under allow_units, a process of the account that is no allowed unit's live
    // MainPID, when the backend can tell from the PID alone (Backend::refuses_pid).
    if (peer.cred.uid != 0 && peer.cred.uid == account_.uid && peer.cred.gid == account_.gid) {
        std::string why;
        if (backend_->refuses_pid(peer.cred.pid, why)) return reject(std::move(socket), ErrorCode::NotAllowed, std::move(why));
    }
    if (const int r = read_peer_pidfd(socket.get(), peer); r < 0)
        return reject(std::move(socket), ErrorCode::NotAllowed, std::string("cannot identify the peer: ") + std::strerror(-r));
    // Sort peers by what the kernel already told us, before they hold anything.
    if (peer.cred.uid != 0 && (peer.cred.uid != account_.uid || peer.cred.gid != account_.gid)) {
        // Members of the observer and supervisor groups may watch (supervisors may also hold
        // the terminal); they can start and control nothing.
        if (!in_observer_group(peer) && !in_supervisor_group(peer))
            return reject(std::move(socket), ErrorCode::NotAllowed, "only the agent's account may connect");
    } else if (peer.cred.uid != 0) {
        // An Unsure peer is admitted like any other; its START waits for the recheck.
        std::string why;
        if (backend_->check_peer(peer.view(), why) == backends::PeerVerdict::Refused)
            return reject(std::move(socket), ErrorCode::NotAllowed, why);
        // Descriptors a client sent and the worker has not closed yet (a close that blocks,
        // on purpose): past this many, the agent gets no more connections to send more.
        if (worker_.backlog() > kMaxWorkerBacklog)
            return reject(std::move(socket), ErrorCode::Overloaded,
                          "descriptors sent earlier are still being closed; try again later");
    }
    switch (admission_.enter_handshake(peer.cred.pid)) {
        case Admission::Handshake::Refused:
            return reject(std::move(socket), ErrorCode::Overloaded, "too many connections are waiting for START");
        case Admission::Handshake::AdmittedEvicting: evict_for_fairness(admission_.evict_candidate()); break;
        case Admission::Handshake::Admitted: break;
    }
    auto connection = std::make_unique<Connection>(*this, std::move(socket), std::move(peer));
    Connection* raw = connection.get();
    connections_.emplace(raw, std::move(connection));
    ++admission_.counters().accepted;
    if (const int r = raw->begin(); r < 0) {
        log_warning("cannot serve connection", {{"ERROR", std::strerror(-r)}});
        raw->abandon();
    }
}

void Server::evict_for_fairness(pid_t victim) {
    Connection* oldest = nullptr;
    for (const auto& [raw, c] : connections_)
        if (c->stage() == Connection::Stage::Handshake && c->peer_pid() == victim &&
            (!oldest || c->serial() < oldest->serial()))
            oldest = raw;
    if (oldest) oldest->evict();
}

std::string Server::new_unit_name() const {
    unsigned char bytes[kUnitNameRandomBytes];
    if (const int r = random_bytes(bytes); r < 0) {
        // Unreachable: init() read random bytes, and from then on getrandom(2) cannot fail
        // for so few. Should it anyway, no name may be made up: stop, as an assertion would.
        log_error_errno(r, "getrandom failed after it had worked; aborting");
        std::abort();
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string name = config_.unit_prefix + "-";
    for (const unsigned char b : bytes) {
        name += kHex[b >> 4];
        name += kHex[b & 15];
    }
    return name + ".service";
}

protocol::StatusReply Server::status() const {
    protocol::StatusReply reply;
    reply.version = PTYVISOR_VERSION;
    reply.backend = std::string(backend_->name());
    const auto& counters = admission_.counters();
    // A session's state as STATUS names it (docs/protocol.md 5.7).
    const auto state_name = [](Session::State state) {
        switch (state) {
            case Session::State::Starting: return "starting";
            case Session::State::Running: return "running";
            case Session::State::Ending: return "ending";
            case Session::State::Ended: return "ended";
        }
        return "ended";
    };
    // Bytes relayed over the daemon's life: the ended sessions' as they ended, and the live
    // ones' so far (the retained ended sessions are already in the first).
    std::uint64_t relayed_in = counters.ended_bytes_in, relayed_out = counters.ended_bytes_out;
    for (const Session* s : sessions_.all()) {
        protocol::StatusReply::Session out;
        out.unit = s->unit();
        out.pid = s->main_pid();
        out.peer_pid = s->starter_pid();
        out.started_at = s->created();
        out.bytes_in = s->bytes_in();
        out.bytes_out = s->log().end();
        out.argv0 = s->argv().empty() ? "" : s->argv().front();
        out.id = s->id();
        out.clients = s->clients();
        out.detached = s->detached();
        out.state = state_name(s->state());
        out.profile = s->profile_name();
        if (const auto usage = s->usage())
            out.usage = protocol::StatusReply::Session::Usage{
                usage->cpu_usec,      usage->memory_current, usage->memory_peak,
                usage->tasks_current, usage->tasks_peak,     usage->oom_kills,
                usage->tasks_limit_hits, usage->io_read_bytes, usage->io_write_bytes};
        if (s->state() != Session::State::Ended) {
            relayed_in += out.bytes_in;
            relayed_out += out.bytes_out;
        }
        reply.sessions.push_back(std::move(out));
    }
    reply.counters.accepted = counters.accepted;
    reply.counters.rate_limited = counters.rate_limited;
    reply.counters.handshake_timeouts = counters.handshake_timeouts;
    reply.counters.evicted = counters.evicted;
    reply.counters.hung_up = counters.hung_up;
    reply.counters.quarantined = counters.quarantined;
    reply.counters.rejected = counters.rejected;
    // Every result and reason, 0 included, so that each series exists from the start.
    reply.counters.starts = counters.starts;
    reply.counters.starts->try_emplace("started", 0);
    reply.counters.starts->try_emplace(std::string(protocol::to_string(protocol::ErrorCode::StartFailed)), 0);
    reply.counters.ended = counters.ended;
    for (const std::string_view reason : protocol::exit_reason_names()) reply.counters.ended->try_emplace(std::string(reason), 0);
    reply.counters.relayed_in = relayed_in;
    reply.counters.relayed_out = relayed_out;
    // The first start is no restart.
    reply.counters.screen_worker_restarts = screens_.starts() > 0 ? screens_.starts() - 1 : 0;
    reply.counters.admission_waits = counters.admission_waits;
    reply.counters.admission_wait_usec = counters.admission_wait_usec;
    return reply;
}

std::string Server::status_json() const { return protocol::encode(status()); }

void Server::retire(Connection* connection) {
    const auto it = connections_.find(connection);
    if (it == connections_.end()) return;
    retired_.push_back(std::move(it->second));
    connections_.erase(it);
    // Destroyed on the next iteration: we may be inside one of its callbacks now.
    schedule_reap();
    resume_accepting();
}

void Server::schedule_reap() {
    // Enabling a defer source allocates nothing; it fails only if the loop itself has failed.
    if (const int r = sd_event_source_set_enabled(reap_source_.get(), SD_EVENT_ONESHOT); r < 0) {
        log_error_errno(r, "cannot schedule the reaper of closed connections; exiting");
        sd_event_exit(event_, 1);
    }
}

void Server::reap() {
    retired_.clear();
    maybe_exit();
}

void Server::begin_shutdown() {
    if (shutting_down_) return;
    if (fd_store() && own_unit_restarting()) return exit_keeping_sessions();  // server_handover.cpp
    shutting_down_ = true;
    log_info("shutting down", {{"SESSIONS", std::to_string(admission_.sessions())}});
    sd_notify(0, "STOPPING=1\nSTATUS=Ending sessions");
    accept_source_.reset();
    listener_.reset();
    std::vector<Connection*> all;
    for (const auto& [raw, c] : connections_) all.push_back(raw);
    for (Connection* c : all) c->shut_down();
    sessions_.shut_down();
    maybe_exit();
}

void Server::maybe_exit() {
    if (shutting_down_ && connections_.empty() && sessions_.empty()) sd_event_exit(event_, 0);
}

}  // namespace ptyvisor::server
