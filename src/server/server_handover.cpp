// The server's side of a handover (server/session_handover.h): taking sessions back at start,
// and re-exec'ing itself on SIGHUP with every running session's descriptors.
#include <sys/epoll.h>
#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "server/server.h"

namespace ptyvisor::server {

namespace {

// While a session is starting or ending the re-exec waits, checking this often; both are
// bounded (the start by the backend, the end by timeouts.drain + timeouts.cleanup).
constexpr std::uint64_t kReexecRetryUsec = 20'000;
// How long the re-exec waits for the blocking worker to finish its jobs (see try_reexec).
constexpr int kReexecWorkerRetries = 250;  // 5 s
constexpr int kReexecSessionRetries = 1500;  // 30 s: a start or a cleanup takes far less

// The parts of one handed-over session, checked; false with `why`.
bool check_parts(const std::string& id, HandedOverSession& parts, const std::string& unit_prefix,
                 HandoverRecord& record, std::unique_ptr<OutputLog>& log, std::string& why) {
    if (!parts.pty || !parts.log || !parts.meta) {
        why = std::string("incomplete: missing") + (parts.pty ? "" : " pty") + (parts.log ? "" : " log") +
              (parts.meta ? "" : " meta");
        return false;
    }
    std::string text;
    if (const int r = read_sealed_memfd(parts.meta.get(), HandoverRecord::kMaxBytes, text); r < 0) {
        why = std::string("unreadable metadata: ") + std::strerror(-r);
        return false;
    }
    if (!decode_handover(text, unit_prefix, record, why)) return false;
    if (record.id != id) {
        why = "metadata names another session";
        return false;
    }
    if (!is_pty_master(parts.pty.get())) {
        why = "the terminal is not a PTY master";
        return false;
    }
    if (const int r = OutputLog::adopt(std::move(parts.log), log); r < 0) {
        why = std::string("bad output log: ") + std::strerror(-r);
        return false;
    }
    return true;
}

}  // namespace

std::size_t Server::adopt(HandedOver& handed) {
    std::size_t adopted = 0;
    for (auto& [id, parts] : handed.sessions) {
        HandoverRecord record;
        std::unique_ptr<OutputLog> log;
        std::string why;
        const auto forget = [&] {
            for (const char* kind : {"pty", "log", "meta"}) fd_store_remove(handover_name(kind, id));
        };
        if (!check_parts(id, parts, config_.unit_prefix, record, log, why)) {
            log_warning("cannot take back a session; it is cleaned up", {{"ID", id}, {"ERROR", why}});
            forget();
            continue;
        }
        auto session = std::make_unique<Session>(session_context_, sessions_, record.unit, record.detached);
        if (!session->adopt(record, std::move(parts.pty), std::move(log), why)) {
            log_warning("cannot take back a session; it is cleaned up", {{"UNIT", record.unit}, {"ERROR", why}});
            forget();
            continue;
        }
        log_info("session taken back", {{"UNIT", record.unit},
                                         {"MAIN_PID", std::to_string(record.main_pid)},
                                         {"DETACHED", record.detached ? "yes" : "no"}});
        sessions_.insert_adopted(std::move(session));
        ++adopted;
    }
    handed.sessions.clear();  // what was not taken back closes here
    return adopted;
}

// SIGTERM with the fd store in use: every running session is there, so we go without ending
// any; the next start takes them back (a stop of the service makes systemd drop the store,
// which hangs their terminals up, and that next start cleans up whatever is left).
void Server::exit_keeping_sessions() {
    shutting_down_ = true;
    log_info("stopping; running sessions stay in the fd store for the next start",
             {{"SESSIONS", std::to_string(sessions_.running())}});
    sd_notify(0, "STOPPING=1\nSTATUS=Exiting; sessions kept in the fd store");
    accept_source_.reset();
    sd_event_exit(event_, 0);
}

void Server::on_hangup() {
    if (reexec_binary_.empty() || !backend_->can_adopt()) {
        log_notice("SIGHUP ignored: this backend cannot keep sessions across a re-exec; restart ptyvisord instead");
        return;
    }
    if (!config_.recording.directory.empty()) {
        // A recording could not go on in the same file: no session may run unrecorded.
        log_notice("SIGHUP ignored: sessions are recorded, and a recording cannot continue across a re-exec");
        return;
    }
    if (shutting_down_ || reexec_pending_) return;
    reexec_pending_ = true;
    log_info("re-exec requested", {{"BINARY", reexec_binary_}});
    // New clients wait in the listener's backlog for the next run.
    accept_source_.reset();
    try_reexec();
}

void Server::try_reexec() {
    for (const Session* s : sessions_.all()) {
        const auto state = s->state();
        if (state == Session::State::Starting || state == Session::State::Ending) {
            // A session may stay Starting for good (its command hangs in exec on a FUSE mount
            // the agent serves): the re-exec is not worth accepting nothing for ever.
            if (++reexec_session_waits_ > kReexecSessionRetries) {
                log_error("re-exec cancelled: a session is still starting or ending; serving on",
                          {{"UNIT", s->unit()}});
                reexec_pending_ = false;
                reexec_session_waits_ = 0;
                add_io(event_, accept_source_, listener_.get(), EPOLLIN, [this](std::uint32_t) { on_accept(); });
                return;
            }
            add_timer(event_, reexec_timer_, kReexecRetryUsec, [this] { try_reexec(); });
            return;
        }
    }
    reexec_session_waits_ = 0;
    // The blocking worker closes descriptors by number, and below the passed descriptors are
    // placed at 3.. over whatever held those numbers: a close still to run on a worker thread
    // would close one of them (a descriptor handed to the worker for closing may be one of
    // those dup2 replaces), and the next run would take back a wrong file. So the re-exec
    // waits until no job is left; only the loop submits jobs, and it is here until exec.
    if (worker_.backlog() > 0) {
        if (++reexec_worker_waits_ > kReexecWorkerRetries) {
            log_error("re-exec cancelled: the blocking worker did not finish its jobs; serving on",
                      {{"JOBS", std::to_string(worker_.backlog())}});
            reexec_pending_ = false;
            reexec_worker_waits_ = 0;
            add_io(event_, accept_source_, listener_.get(), EPOLLIN, [this](std::uint32_t) { on_accept(); });
            return;
        }
        add_timer(event_, reexec_timer_, kReexecRetryUsec, [this] { try_reexec(); });
        return;
    }
    reexec_worker_waits_ = 0;
    std::vector<UniqueFd> metadata;
    std::vector<std::pair<std::string, int>> fds{{"listener", listener_.get()}};
    for (Session* s : sessions_.all_mutable()) {
        if (!s->can_hand_over()) continue;  // ended: its status and log are not kept
        UniqueFd meta;
        if (const int r = make_sealed_memfd("ptyvisor-meta", encode_handover(s->handover_record()), meta); r < 0) {
            log_error_errno(r, "cannot write a session's metadata; re-exec cancelled", {{"UNIT", s->unit()}});
            reexec_pending_ = false;
            add_io(event_, accept_source_, listener_.get(), EPOLLIN, [this](std::uint32_t) { on_accept(); });
            return;
        }
        fds.emplace_back(handover_name("pty", s->id()), s->terminal_fd());
        fds.emplace_back(handover_name("log", s->id()), s->log().fd());
        fds.emplace_back(handover_name("meta", s->id()), meta.get());
        metadata.push_back(std::move(meta));
    }
    log_info("re-executing", {{"BINARY", reexec_binary_}, {"SESSIONS", std::to_string(metadata.size())}});
    bool fatal = false;
    std::string why;
    reexec_with(reexec_binary_, reexec_argv_, fds, fatal, why);
    if (fatal) {
        // Our descriptors are gone: nothing can be served or cleaned from here. The sessions
        // are left to the next start's cleanup_orphans(), as after a crash.
        log_error("re-exec failed; exiting", {{"ERROR", why}});
        std::_Exit(1);
    }
    log_error("re-exec failed; serving on", {{"ERROR", why}});
    reexec_pending_ = false;
    add_io(event_, accept_source_, listener_.get(), EPOLLIN, [this](std::uint32_t) { on_accept(); });
}

}  // namespace ptyvisor::server
