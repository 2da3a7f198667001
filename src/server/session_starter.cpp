#include "server/session_starter.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <exception>

#include "common/event.h"
#include "common/linux.h"
#include "common/log.h"
#include "common/process.h"
#include "server/audit_log.h"
#include "server/session.h"
#include "server/session_environment.h"
#include "server/shell_integration.h"
#include "server/session_registry.h"

namespace ptyvisor::server {

using protocol::ErrorCode;

// A START's directory and command, checked on a worker thread (blocking_worker.h): what the
// loop must not do itself, since the client chose the directory and the PATH.
struct SessionStarter::Check {
    backends::SessionSpec spec;  // in: argv, env, account, cwd; out: what the resolver fills
    UniqueFd cwd;                // owned here while the check runs
    backends::Resolver resolver = nullptr;
    std::optional<ErrorCode> error;
    std::string why;

    // On the worker thread, with the agent's file-system identity.
    void run() noexcept {
        try {
            struct stat st{};
            if (::fstat(cwd.get(), &st) < 0 || !S_ISDIR(st.st_mode)) {
                error = ErrorCode::NotADirectory;
                why = "the descriptor sent with START is not a directory";
            } else if (st.st_dev != spec.cwd_dev || st.st_ino != spec.cwd_ino) {
                error = ErrorCode::CwdMismatch;
                why = "the directory does not match cwd_dev and cwd_ino";
            } else if (resolver && !resolver(spec, why)) {
                error = ErrorCode::StartFailed;
            } else if (spec.cwd_path.empty()) {
                // The directory's path as the kernel names it, for the policy and LIST.
                char link[4096];
                const std::string fd_path = "/proc/self/fd/" + std::to_string(cwd.get());
                const ssize_t n = ::readlink(fd_path.c_str(), link, sizeof link);
                if (n > 0 && static_cast<std::size_t>(n) < sizeof link) spec.cwd_path.assign(link, static_cast<std::size_t>(n));
            }
        } catch (...) {
            error = ErrorCode::Internal;
            why = "the start could not be prepared";
        }
    }
};

SessionStarter::SessionStarter(Context context, const PeerIdentity& peer, SessionClient& controller,
                               Callbacks callbacks)
    : context_(context), peer_(peer), controller_(controller), callbacks_(std::move(callbacks)) {
    // Every refusal of a START before the backend took it comes through here: counted by its
    // code for the metrics (the session counts what the backend says: Session::on_started).
    callbacks_.refused = [admission = context_.admission, refused = std::move(callbacks_.refused)](
                             ErrorCode code, const std::string& why) {
        admission->count_start(code);
        refused(code, why);
    };
}

SessionStarter::~SessionStarter() {
    Leftovers leftovers;
    abandon(leftovers);
    if (!leftovers.fds.empty() || leftovers.check) {
        context_.worker->submit([fds = std::make_shared<std::vector<UniqueFd>>(std::move(leftovers.fds)),
                                 check = std::move(leftovers.check)]() mutable {
            fds->clear();
            check.reset();
        });
    }
}

// Every answer from a worker or the backend comes through here: an exception ends this START
// (and with it the connection) with ERROR internal, never the daemon.
template <class F>
auto SessionStarter::answered(F f) {
    return [this, f = std::move(f)] {
        try {
            f();
        } catch (const std::exception& e) {
            log_error("session start failed", {{"ERROR", e.what()}, {"PEER_PID", std::to_string(peer_.cred.pid)}});
            callbacks_.refused(ErrorCode::Internal, "internal error; the connection ends");
            return;
        } catch (...) {
            callbacks_.refused(ErrorCode::Internal, "internal error; the connection ends");
            return;
        }
        callbacks_.answered();
    };
}

bool SessionStarter::may_start(const PeerIdentity& peer, const backends::Account& account) {
    return peer.cred.uid == account.uid;
}

void SessionStarter::begin(protocol::StartRequest request, UniqueFd cwd, bool detach, bool shell_integration,
                           std::optional<backends::SandboxProfile> profile) {
    const auto& account = *context_.account;
    // The directory is judged, and the command looked up, on a worker thread: either can
    // block for as long as the client likes (a FUSE mount that it serves).
    auto check = std::make_shared<Check>();
    check->cwd = std::move(cwd);
    auto& spec = check->spec;
    spec.argv = std::move(request.argv);
    for (const auto& e : request.env) env_names_.push_back(e.substr(0, e.find('=')));
    spec.env = session_environment(std::move(request.env), request.term, account);
    if (shell_integration) {
        std::string why;
        if (auto shell = integrate_shell(spec.argv, std::move(spec.env), shell_integration_dir(), why)) {
            spec.argv = std::move(shell->argv);
            spec.env = std::move(shell->env);
            shell_ = std::move(shell->shell);
        }
    }
    spec.cwd = check->cwd.get();
    spec.cwd_dev = request.cwd_dev;
    spec.cwd_ino = request.cwd_ino;
    spec.account = account;
    spec.properties = context_.config->session_properties;
    spec.profile = std::move(profile);
    size_ = request.size;
    detach_ = detach;
    check->resolver = context_.backend->resolver();
    check_ = check;
    checking_ = std::make_shared<BlockingWorker::Completion>(answered([this] { on_checked(); }));
    // Ahead of every queued close: under a connection flood the refused sockets' closes
    // queue by the thousand, and this client is waiting.
    context_.worker->submit([check] { check->run(); }, checking_, BlockingWorker::Lane::Request);
}

void SessionStarter::on_checked() {
    checking_.reset();
    const auto check = std::move(check_);
    cwd_ = std::move(check->cwd);
    if (check->error) return callbacks_.refused(*check->error, check->why);
    spec_ = std::move(check->spec);
    // The administrator's policy (server/policy.h) on what, where and under which profile;
    // the argv it judges is the one that runs (with a shell's integration, the shell).
    std::optional<std::string> profile;
    if (spec_->profile) profile = spec_->profile->name;
    const Decision decision = evaluate(context_.config->policy, spec_->argv, spec_->cwd_path, profile);
    rule_ = decision.where;
    if (decision.verdict != Verdict::Allow) {
        audit_start("", "deny", decision.reason);
        log_info("session start denied by the policy",
                 {{"PEER_PID", std::to_string(peer_.cred.pid)}, {"RULE", decision.where}, {"REASON", decision.reason}});
        return callbacks_.refused(ErrorCode::Denied, decision.reason);
    }
    authorize(false);
}

void SessionStarter::audit_start(const std::string& session, const std::string& decision, const std::string& reason) {
    if (!context_.audit || !spec_) return;
    AuditRecord r;
    r.kind = AuditKind::Start;
    r.session = session;
    r.argv = spec_->argv;
    r.cwd = spec_->cwd_path;
    r.env_names = env_names_;
    if (spec_->profile) r.profile = spec_->profile->name;
    r.peer_pid = peer_.cred.pid;
    r.peer_uid = peer_.cred.uid;
    r.rule = rule_;
    r.decision = decision;
    r.reason = reason;
    context_.audit->record(std::move(r));
}

void SessionStarter::authorize(bool rechecked) {
    // Check the peer again right before start: it may have exec'd or died since accept.
    std::string why;
    auto verdict = backends::PeerVerdict::Refused;
    if (pidfd_alive(peer_.pidfd.get())) verdict = context_.backend->check_peer(peer_.view(), why);
    if (verdict == backends::PeerVerdict::Unsure && !rechecked) {
        // Perhaps the new main process of an allowed unit that the backend has not learnt
        // yet: ask it to look again, and read nothing more until it has.
        rechecking_ = std::make_shared<std::function<void()>>(answered([this] { on_rechecked(); }));
        recheck_began_usec_ = now_usec(context_.event);
        context_.backend->recheck(rechecking_);
        return;
    }
    if (verdict != backends::PeerVerdict::Allowed)
        return callbacks_.refused(ErrorCode::NotAllowed, why.empty() ? "the peer is gone" : why);
    // A traced peer is refused: its tracer drives it, and the tracer may be a session (a
    // session may not start sessions), which ptrace let past that rule (docs/security.md,
    // "A session gets a session by ptrace"). A tracer that injects and detaches before START
    // is not seen here: Yama's ptrace_scope closes that (main.cpp warns where it is off).
    if (const pid_t tracer = tracer_of(peer_.cred.pid); tracer != 0)
        return callbacks_.refused(ErrorCode::NotAllowed, "the peer is being traced (by process " +
                                                             std::to_string(tracer) +
                                                             "); a traced process may not start sessions");
    // The session starts with the agent's resource limits, not the daemon's: never more.
    ResourceLimits limits{};
    if (const int r = read_resource_limits(peer_.cred.pid, peer_.pidfd.get(), limits); r < 0)
        return callbacks_.refused(ErrorCode::NotAllowed,
                                  std::string("cannot read the peer's resource limits: ") + std::strerror(-r));
    spec_->limits = limits;
    auto& admission = *context_.admission;
    if (!admission.reserve_session())
        return callbacks_.refused(ErrorCode::Busy, "all " + std::to_string(context_.config->limits.max_sessions) +
                                                       " session slots are in use");
    holds_slot_ = true;
    if (!admission.take_admission(now_usec(context_.event)))
        return callbacks_.refused(ErrorCode::RateLimited, "too many sessions started in the last minute");
    start();
}

void SessionStarter::on_rechecked() {
    // The backend holds a copy of rechecking_ while it calls us: resetting it is safe.
    rechecking_.reset();
    count_admission_wait();
    if (!spec_) return;
    authorize(true);
}

void SessionStarter::start() {
    Session& session = context_.sessions->create(detach_);
    audit_start(session.id(), "allow", "");
    backends::SessionSpec spec = std::move(*spec_);
    spec_.reset();
    const std::string argv0 = spec.argv.front();
    if (!shell_.empty()) session.set_shell(shell_);
    callbacks_.attached(session);
    holds_slot_ = false;  // the session's from now on, whatever start() says
    std::string why;
    const bool ok = session.start(std::move(spec), size_, &controller_, peer_.cred.pid, why);
    // The backend is done with the directory (the session has it, or systemd its path).
    context_.worker->dispose(std::move(cwd_));
    if (!ok) return callbacks_.refused(ErrorCode::StartFailed, why);
    log_info("session starting", {{"UNIT", session.unit()}, {"PEER_PID", std::to_string(peer_.cred.pid)},
                                  {"PEER_UID", std::to_string(peer_.cred.uid)}, {"ARGV0", argv0},
                                  {"DETACHED", detach_ ? "yes" : "no"},
                                  {"PROFILE", session.profile_name()}});
    callbacks_.started(session);
}

void SessionStarter::count_admission_wait() {
    auto& counters = context_.admission->counters();
    ++counters.admission_waits;
    const std::uint64_t now = now_usec(context_.event);
    counters.admission_wait_usec += now > recheck_began_usec_ ? now - recheck_began_usec_ : 0;
}

ErrorCode SessionStarter::timeout_code() const {
    return checking_ ? ErrorCode::StartFailed : ErrorCode::NotAllowed;
}

std::string SessionStarter::timeout_message() const {
    return checking_ ? "the working directory or the command did not answer in time"
                     : "the peer could not be verified in time";
}

void SessionStarter::abandon(Leftovers& out) {
    checking_.reset();    // a check still running is abandoned: its answer is dropped unseen
    if (rechecking_) count_admission_wait();  // it waited, if in vain
    rechecking_.reset();  // likewise the backend's (RecheckCallback)
    spec_.reset();
    if (cwd_) out.fds.push_back(std::move(cwd_));
    if (check_) out.check = std::move(check_);
    if (holds_slot_) {
        holds_slot_ = false;
        context_.admission->release_session();
    }
}

}  // namespace ptyvisor::server
