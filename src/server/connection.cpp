#include "server/connection.h"

#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/linux.h"
#include "common/log.h"
#include "protocol/fd_passing.h"
#include "server/pty.h"
#include "server/server.h"
#include "server/session_environment.h"

namespace ptyvisor::server {

using protocol::ErrorCode;
using protocol::ExitReason;
using protocol::FrameType;

namespace {

std::uint64_t usec(std::chrono::duration<double> d) { return to_usec(d); }

// How long output waits for refused descriptors to be closed. Closing takes microseconds,
// unless the client made it block; then the ERROR goes out anyway.
constexpr std::uint64_t kDisposeWaitUsec = 100'000;

}  // namespace

// A START's directory and command, checked on a worker thread (blocking_worker.h): what the
// loop must not do itself, since the client chose the directory and the PATH.
struct Connection::StartCheck {
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
            }
        } catch (...) {
            error = ErrorCode::Internal;
            why = "the start could not be prepared";
        }
    }
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

void Connection::on_exception(const char* where) noexcept {
    std::string what = "unknown exception";
    try {
        throw;
    } catch (const std::exception& e) {
        what = e.what();
    } catch (...) {
    }
    try {
        log_error("connection failed", {{"WHERE", where}, {"ERROR", what}, {"PEER_PID", std::to_string(peer_pid())}});
        if (phase_ == Phase::Closed) return;
        if (exit_queued_) return close();
        send_error(ErrorCode::Internal, "internal error; the connection ends");
    } catch (...) {
        try {
            close();
        } catch (...) {
            // Nothing is left to try: the connection stays until the daemon stops.
        }
    }
}

Connection::Connection(Server& server, UniqueFd socket, PeerIdentity peer)
    : server_(server), socket_(std::move(socket)), peer_(std::move(peer)), serial_(server.next_serial()) {}

Connection::~Connection() = default;

int Connection::begin() {
    const int size = static_cast<int>(server_.config().limits.socket_buffer_bytes);
    ::setsockopt(socket_.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    ::setsockopt(socket_.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    const int r = add_io(server_.event(), socket_source_, socket_.get(), EPOLLIN | EPOLLRDHUP,
                         guarded("socket", [this](std::uint32_t revents) { on_socket(revents); }));
    if (r < 0) return r;
    return add_timer(server_.event(), handshake_timer_, usec(server_.config().timeouts.handshake),
                     guarded("handshake timer", [this] { on_handshake_timeout(); }));
}

SessionStatus Connection::status() const {
    return {session_ ? session_->unit() : std::string(), session_ ? session_->main_pid() : 0,
            peer_.cred.pid, started_at_, bytes_in_, bytes_out_, argv0_};
}

// ---- Handshake -------------------------------------------------------------------------

void Connection::on_socket(std::uint32_t revents) {
    if (revents & EPOLLOUT) flush_output();
    if (phase_ == Phase::Closed) return;
    const bool hangup = (revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
    if (awaiting_answer()) {
        // Only a hang-up is watched meanwhile: whoever asked is gone, so is the START.
        if (hangup) close();
        return;
    }
    if (exit_queued_) {
        // Only the last frame is left to send; nothing the client says matters any more.
        if (revents & (EPOLLHUP | EPOLLERR)) close();
        return;
    }
    if (held_input_.size() >= server_.config().limits.held_input_bytes) {
        // Not reading (backpressure), but a hang-up is still news: it ends the session.
        if (hangup) {
            socket_eof_ = true;
            end(ExitReason::Disconnected);
            update_socket_events();
        }
        return;
    }
    if ((revents & EPOLLIN) || hangup) receive();
}

void Connection::receive() {
    std::uint8_t buffer[protocol::kHeaderSize + protocol::kMaxIoPayloadSize];
    const auto input_limit = server_.config().limits.held_input_bytes;
    while (phase_ != Phase::Closed && !socket_eof_ && held_input_.size() < input_limit) {
        auto got = protocol::receive_with_fds(socket_.get(), buffer);
        if (got.error == EAGAIN || got.error == EINTR) break;
        if (got.error != 0) {
            socket_eof_ = true;
            break;
        }
        // Every descriptor is kept until send_error() or start hands it to the worker:
        // none is closed here, on the loop.
        const bool fds_allowed =
            got.fds.empty() || (phase_ == Phase::Handshake && start_fds_.size() + got.fds.size() <= 1);
        keep_client_fds(got.fds);
        if (got.control_truncated) return send_error(ErrorCode::WrongFdCount, "ancillary data was truncated");
        if (!fds_allowed)
            return send_error(ErrorCode::WrongFdCount, "exactly one descriptor may be sent, and only with START");
        if (got.eof) {
            socket_eof_ = true;
            break;
        }
        decoder_.feed(std::span(buffer, got.bytes));
        if (!handle_decoded_frames()) return update_socket_events();
    }
    if (socket_eof_) {
        if (phase_ == Phase::Handshake) {
            log_debug("client left during the handshake", {{"PEER_PID", std::to_string(peer_pid())}});
            return close();
        }
        if (exit_queued_) return close();
        end(ExitReason::Disconnected);
    }
    update_socket_events();
}

bool Connection::handle_decoded_frames() {
    protocol::Frame frame;
    for (;;) {
        if (phase_ == Phase::Closed || exit_queued_ || awaiting_answer()) return false;
        const auto status = decoder_.next(frame);
        if (status == protocol::FrameDecoder::Status::NeedMore) return true;
        if (status == protocol::FrameDecoder::Status::Failed) {
            send_error(decoder_.error(), "malformed frame header");
            return false;
        }
        handle_frame(frame);
    }
}

void Connection::handle_frame(protocol::Frame& frame) {
    if (phase_ == Phase::Handshake) {
        if (frame.type == FrameType::Start) return handle_start(frame);
        if (frame.type == FrameType::StatusRequest) return handle_status_request();
        return send_error(ErrorCode::UnexpectedFrame,
                          "expected START, got " + std::string(protocol::to_string(frame.type)));
    }
    if (phase_ == Phase::Ending) return;  // the session is over; late input is dropped
    switch (frame.type) {
        case FrameType::Input: return handle_input(frame);
        case FrameType::Resize: {
            const auto size = protocol::decode_resize(frame.text());
            if (!size) return send_error(ErrorCode::BadFrame, "RESIZE: " + size.error);
            set_window_size(master_.get(), *size.value);
            return;
        }
        case FrameType::Signal: {
            const auto sig = protocol::decode_signal(frame.text());
            if (!sig) return send_error(ErrorCode::BadFrame, "SIGNAL: " + sig.error);
            if (sig.value->target != protocol::SignalTarget::Foreground) {
                session_->signal_all(sig.value->signal);
                return;
            }
            // Not TIOCSIG: the pty driver takes only SIGINT, SIGQUIT and SIGTSTP from it. The
            // group is the terminal's, but only its processes in this session that the agent
            // could signal are signalled; a signal that reaches nobody is refused, never lost.
            const pid_t group = ::tcgetpgrp(master_.get());
            const int e = session_->signal_foreground_group(group, sig.value->signal);
            // Once the command has exited, the EXIT that follows says why nothing was left to
            // signal; an ERROR would replace it and lose the exit status.
            if (e != 0 && !exited_)
                return send_error(ErrorCode::NotAllowed,
                                  "SIGNAL " + std::to_string(sig.value->signal) +
                                      ": the terminal's foreground process group " + std::to_string(group) +
                                      (e == EPERM ? " is not the agent's" : " has no process in the session"));
            return;
        }
        case FrameType::Stop:
            // STARTED precedes EXIT: a STOP that overtakes the start waits for it, as the
            // INPUT sent with it does.
            if (phase_ == Phase::Starting) {
                stop_after_start_ = true;
                return;
            }
            return end(ExitReason::Stopped);
        default:
            return send_error(ErrorCode::UnexpectedFrame,
                              std::string(protocol::to_string(frame.type)) + " is not allowed in a session");
    }
}

void Connection::handle_status_request() {
    if (peer_.cred.uid != 0) return send_error(ErrorCode::NotAllowed, "status is for root only");
    if (!start_fds_.empty()) return send_error(ErrorCode::WrongFdCount, "STATUS_REQUEST carries no descriptor");
    out_.push(FrameType::Status, server_.status_json());
    exit_queued_ = true;
    leave_handshake();
    flush_output();
}

void Connection::handle_start(const protocol::Frame& frame) {
    const auto& account = server_.account();
    if (peer_.cred.uid != account.uid) return send_error(ErrorCode::NotAllowed, "only the agent's account may start sessions");
    auto request = protocol::decode_start(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "START: " + request.error);
    if (start_fds_.size() != 1)
        return send_error(ErrorCode::WrongFdCount, "START must carry exactly one descriptor, the working directory");
    // The directory is judged, and the command looked up, on a worker thread: either can
    // block for as long as the client likes (a FUSE mount that it serves).
    auto check = std::make_shared<StartCheck>();
    check->cwd = std::move(start_fds_.front());
    start_fds_.clear();
    auto& spec = check->spec;
    spec.argv = std::move(request.value->argv);
    spec.env = session_environment(std::move(request.value->env), request.value->term, account);
    spec.cwd = check->cwd.get();
    spec.cwd_dev = request.value->cwd_dev;
    spec.cwd_ino = request.value->cwd_ino;
    spec.account = account;
    spec.properties = server_.config().session_properties;
    size_ = request.value->size;
    check->resolver = server_.backend().resolver();
    start_check_ = check;
    start_checked_ = std::make_shared<BlockingWorker::Completion>(guarded("start check", [this] { on_start_checked(); }));
    server_.worker().submit([check] { check->run(); }, start_checked_);
    update_socket_events();
}

void Connection::on_start_checked() {
    start_checked_.reset();
    const auto check = std::move(start_check_);
    cwd_ = std::move(check->cwd);
    if (check->error) return send_error(*check->error, check->why);
    spec_ = std::move(check->spec);
    authorize_start(false);
    // Frames the client sent behind START were left in the decoder and the socket.
    if (handle_decoded_frames()) receive();
    else update_socket_events();
}

void Connection::authorize_start(bool rechecked) {
    // Check the peer again right before start: it may have exec'd or died since accept.
    std::string why;
    auto verdict = backends::PeerVerdict::Refused;
    if (pidfd_alive(peer_.pidfd.get())) verdict = server_.backend().check_peer(peer_.view(), why);
    if (verdict == backends::PeerVerdict::Unsure && !rechecked) {
        // Perhaps the new main process of an allowed unit that the backend has not learnt
        // yet: ask it to look again, and read nothing more until it has.
        peer_recheck_ = std::make_shared<std::function<void()>>(guarded("peer recheck", [this] { on_peer_rechecked(); }));
        server_.backend().recheck(peer_recheck_);
        return;
    }
    // Every refusal hands the directory to the worker before its ERROR goes out.
    if (verdict != backends::PeerVerdict::Allowed)
        return send_error(ErrorCode::NotAllowed, why.empty() ? "the peer is gone" : why);
    auto& admission = server_.admission();
    if (!admission.reserve_session())
        return send_error(ErrorCode::Busy, "all " + std::to_string(server_.config().limits.max_sessions) +
                                               " session slots are in use");
    holds_session_slot_ = true;
    if (!admission.take_admission(now_usec(server_.event())))
        return send_error(ErrorCode::RateLimited, "too many sessions started in the last minute");
    leave_handshake();
    start_session();
}

void Connection::on_peer_rechecked() {
    // The backend holds a copy of peer_recheck_ while it calls us: resetting it is safe.
    peer_recheck_.reset();
    if (phase_ != Phase::Handshake || exit_queued_ || !spec_) return;
    authorize_start(true);
    // Frames the client sent behind START were left in the decoder and the socket.
    if (handle_decoded_frames()) receive();
    else update_socket_events();
}

void Connection::start_session() {
    const auto& account = server_.account();
    PtyPair pty;
    if (const int e = open_pty(account.uid, server_.terminal_group(), size_, pty); e != 0)
        return send_error(ErrorCode::StartFailed, std::string("cannot allocate a terminal: ") + std::strerror(e));
    master_ = std::move(pty.master);

    backends::SessionSpec spec = std::move(*spec_);
    spec_.reset();
    spec.unit_name = server_.new_unit_name();
    spec.tty = std::move(pty.peer);
    spec.tty_path = pty.peer_path;
    argv0_ = spec.argv.front();
    const std::string unit = spec.unit_name;

    backends::SessionEvents events;
    events.on_started = guarded("session started", [this](pid_t pid) { on_started(pid); });
    events.on_start_failed = guarded("session start failed", [this](std::string why) { on_start_failed(why); });
    events.on_exited = guarded("session exited", [this](protocol::ExitStatus s) { on_exited(std::move(s)); });
    std::string why;
    session_ = server_.backend().start(std::move(spec), std::move(events), why);
    // The backend is done with the directory (the session has it, or systemd its path).
    server_.worker().dispose(std::move(cwd_));
    if (!session_) return send_error(ErrorCode::StartFailed, why);
    phase_ = Phase::Starting;
    started_at_ = static_cast<std::int64_t>(std::time(nullptr));
    add_io(server_.event(), pty_source_, master_.get(), EPOLLIN, guarded("terminal", [this](std::uint32_t r) { on_pty(r); }));
    update_pty_events();  // nothing is read before STARTED is sent: OUTPUT never precedes it
    log_info("session starting", {{"UNIT", unit}, {"PEER_PID", std::to_string(peer_pid())},
                                  {"PEER_UID", std::to_string(peer_.cred.uid)}, {"ARGV0", argv0_}});
}

void Connection::on_started(pid_t pid) {
    if (phase_ != Phase::Starting) return;
    phase_ = Phase::Running;
    started_ = true;
    handshake_timer_.reset();
    out_.push(FrameType::Started, protocol::encode(protocol::Started{session_->unit(), pid}));
    log_info("session started", {{"UNIT", session_->unit()}, {"MAIN_PID", std::to_string(pid)}});
    write_held_input();
    flush_output();
    if (stop_after_start_ && phase_ == Phase::Running) end(ExitReason::Stopped);
}

void Connection::on_start_failed(const std::string& why) {
    log_warning("session failed to start", {{"UNIT", session_->unit()}, {"ERROR", why}});
    send_error(ErrorCode::StartFailed, why);
}

void Connection::on_handshake_timeout() {
    if (start_checked_)
        return send_error(ErrorCode::StartFailed, "the working directory or the command did not answer in time");
    if (peer_recheck_)
        return send_error(ErrorCode::NotAllowed, "the peer could not be verified in time");
    if (phase_ == Phase::Handshake) {
        ++server_.admission().counters().handshake_timeouts;
        return send_error(ErrorCode::HandshakeTimeout, "START did not arrive in time");
    }
    if (phase_ == Phase::Starting) send_error(ErrorCode::StartFailed, "the command did not start in time");
}

// ---- Relay -----------------------------------------------------------------------------

void Connection::handle_input(const protocol::Frame& frame) {
    bytes_in_ += frame.payload.size();
    held_input_.insert(held_input_.end(), frame.payload.begin(), frame.payload.end());
    if (phase_ == Phase::Running) write_held_input();
}

void Connection::write_held_input() {
    while (!held_input_.empty()) {
        const ssize_t n = ::write(master_.get(), held_input_.data(), held_input_.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) break;
            held_input_.clear();
            if (errno == EIO) break;  // the terminal has no reader left; the end is near
            return end(ExitReason::InputFailed);
        }
        held_input_.erase(held_input_.begin(), held_input_.begin() + n);
    }
    if (held_input_.empty()) held_input_.shrink_to_fit();
    update_pty_events();
    update_socket_events();
}

void Connection::on_pty(std::uint32_t revents) {
    if ((revents & EPOLLOUT) && phase_ == Phase::Running) write_held_input();
    if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_pty();
}

void Connection::read_pty() {
    // Output goes out only between STARTED and the last frame.
    if (!started_ || exit_queued_) return;
    const std::size_t limit = server_.config().limits.output_buffer_bytes;
    while (master_ && !pty_closed_ && out_.size() < limit) {
        auto space = out_.prepare_output(protocol::kMaxIoPayloadSize);
        const ssize_t n = ::read(master_.get(), space.data(), space.size());
        if (n > 0) {
            out_.commit_output(static_cast<std::size_t>(n));
            bytes_out_ += static_cast<std::uint64_t>(n);
            continue;
        }
        out_.commit_output(0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        // EIO: every holder of the terminal's peer has closed it; all output is in.
        pty_closed_ = true;
        if (n < 0 && errno != EIO && !ending_) {
            flush_output();
            return end(ExitReason::OutputFailed);
        }
    }
    flush_output();
    if (phase_ == Phase::Closed) return;
    update_pty_events();
    if (pty_closed_) maybe_finish();
}

void Connection::flush_output() {
    if (!socket_ || output_held_) return;
    bool progress = false;
    switch (out_.flush(socket_.get(), progress)) {
        case OutputQueue::Flush::Drained:
            stall_timer_.reset();
            if (exit_queued_) return close();
            break;
        case OutputQueue::Flush::Blocked:
            // The operation timeout runs from the last byte the client took.
            if (progress || !stall_timer_)
                rearm_timer(server_.event(), stall_timer_, usec(server_.config().timeouts.operation),
                            guarded("stall timer", [this] { on_stalled(); }));
            break;
        case OutputQueue::Flush::Failed:
            // The client is gone: what it did not take is dropped, and nothing more is sent.
            out_ = OutputQueue();
            socket_eof_ = true;
            set_io_events(socket_source_, 0);
            if (exit_queued_ || phase_ == Phase::Handshake) return close();
            end(ExitReason::Disconnected);
            return;
    }
    update_socket_events();
    update_pty_events();
}

void Connection::on_stalled() {
    log_warning("client stalled", {{"PEER_PID", std::to_string(peer_pid())}});
    if (exit_queued_ || !session_) return close();
    end(ExitReason::ClientStalled);
}

void Connection::update_socket_events() {
    if (!socket_source_ || phase_ == Phase::Closed) return;
    std::uint32_t events = 0;
    if (awaiting_answer()) events |= EPOLLRDHUP;
    else if (!socket_eof_ && !exit_queued_) {
        events |= EPOLLRDHUP;
        if (held_input_.size() < server_.config().limits.held_input_bytes) events |= EPOLLIN;
    }
    if (!out_.empty()) events |= EPOLLOUT;
    set_io_events(socket_source_, events);
}

void Connection::update_pty_events() {
    if (!pty_source_) return;
    std::uint32_t events = 0;
    if (started_ && !exit_queued_ && !pty_closed_ &&
        out_.size() < server_.config().limits.output_buffer_bytes)
        events |= EPOLLIN;
    if (!held_input_.empty() && phase_ == Phase::Running && !pty_closed_) events |= EPOLLOUT;
    set_io_events(pty_source_, events);
}

// ---- End -------------------------------------------------------------------------------

void Connection::on_exited(protocol::ExitStatus status) {
    exited_ = true;
    exit_status_ = std::move(status);
    log_info("session command exited", {{"UNIT", session_->unit()},
                                        {"EXIT", std::to_string(exit_status_.shell_status())}});
    if (!ending_) {
        ending_ = true;
        reason_ = exit_status_.reason;
        phase_ = Phase::Ending;
        start_drain_timer();
        read_pty();
        return;
    }
    maybe_finish();
}

void Connection::end(ExitReason reason) {
    if (ending_ || phase_ == Phase::Closed) return;
    ending_ = true;
    reason_ = reason;
    phase_ = Phase::Ending;
    if (reason == ExitReason::Disconnected || reason == ExitReason::ClientStalled) out_.drop_unsent();
    if (session_) return stop_session();
    maybe_finish();
}

void Connection::stop_session() {
    if (stop_requested_) return;
    stop_requested_ = true;
    const auto deadline = backends::Clock::now() +
                          std::chrono::duration_cast<backends::Clock::duration>(server_.config().timeouts.cleanup);
    session_->stop(deadline, guarded("session stopped", [this](bool ok, std::string why) { on_stopped(ok, why); }));
}

void Connection::on_stopped(bool ok, const std::string& why) {
    stopped_ = true;
    if (holds_session_slot_) {
        holds_session_slot_ = false;
        server_.admission().release_session();
    }
    if (!ok) return server_.fail_closed(why);
    if (close_after_stop_) return close();
    log_info("session cleaned up", {{"UNIT", session_->unit()}, {"REASON", std::string(protocol::to_string(reason_))}});
    if (!drain_timer_) start_drain_timer();
    read_pty();
    maybe_finish();
}

void Connection::start_drain_timer() {
    add_timer(server_.event(), drain_timer_, usec(server_.config().timeouts.drain), guarded("drain timer", [this] {
        drain_expired_ = true;
        maybe_finish();
    }));
}

void Connection::maybe_finish() {
    if (!ending_ || exit_queued_ || phase_ == Phase::Closed) return;
    // A session that never started has no output to wait for.
    const bool drained = pty_closed_ || drain_expired_ || !master_ || !started_;
    if (session_ && !stop_requested_) {
        // The command ended on its own: wait for its output, then clean up what is left.
        if (!drained) return;
        if (!pty_closed_ && reason_ == ExitReason::Exited) reason_ = ExitReason::DrainTimeout;
        return stop_session();
    }
    if (session_ && !stopped_) return;
    if (!drained) return;
    pty_source_.reset();
    drain_timer_.reset();
    master_.reset();
    if (socket_eof_ || reason_ == ExitReason::Disconnected) return close();
    protocol::ExitStatus status = exited_ ? exit_status_ : protocol::ExitStatus{};
    status.reason = reason_;
    out_.push(FrameType::Exit, protocol::encode(status));
    exit_queued_ = true;
    log_info("session ended", {{"UNIT", session_ ? session_->unit() : std::string()},
                               {"REASON", std::string(protocol::to_string(reason_))},
                               {"EXIT", std::to_string(status.shell_status())},
                               {"DURATION_S", std::to_string(std::time(nullptr) - started_at_)}});
    flush_output();
}

void Connection::send_error(ErrorCode code, const std::string& message) {
    if (phase_ == Phase::Closed || exit_queued_) return;
    server_.admission().count_rejected(code);
    log_info("refused client", {{"CODE", std::string(protocol::to_string(code))}, {"ERROR", message},
                                {"PEER_PID", std::to_string(peer_pid())}});
    peer_recheck_.reset();
    start_checked_.reset();  // a check still running is abandoned; its directory goes below
    dispose_client_fds();
    if (session_ && !stopped_) {
        // A session exists: ERROR replaces EXIT, and the session is cleaned up as usual.
        ending_ = true;
        phase_ = Phase::Ending;
        out_.drop_unsent();
        out_.push(FrameType::Error, protocol::encode(protocol::ErrorReply{code, message}));
        exit_queued_ = true;
        stop_session();
        return flush_output();
    }
    leave_handshake();
    out_.push(FrameType::Error, protocol::encode(protocol::ErrorReply{code, message}));
    exit_queued_ = true;
    flush_output();
    // A client that never reads its ERROR is cut at the operation timeout.
    if (phase_ != Phase::Closed && !stall_timer_)
        rearm_timer(server_.event(), stall_timer_, usec(server_.config().timeouts.operation),
                    guarded("error timer", [this] { close(); }));
}

void Connection::shut_down() {
    if (phase_ == Phase::Handshake) return send_error(ErrorCode::ShuttingDown, "the daemon is stopping");
    if (phase_ == Phase::Starting) return send_error(ErrorCode::ShuttingDown, "the daemon is stopping");
    end(ExitReason::Shutdown);
}

void Connection::evict() {
    ++server_.admission().counters().evicted;
    send_error(ErrorCode::Overloaded, "too many connections are waiting; yours was the oldest of the busiest peer");
}

void Connection::keep_client_fds(std::vector<UniqueFd>& fds) {
    for (auto& fd : fds) start_fds_.push_back(std::move(fd));
    fds.clear();
}

void Connection::dispose_client_fds() {
    auto fds = std::make_shared<std::vector<UniqueFd>>(std::move(start_fds_));
    start_fds_.clear();
    if (cwd_) fds->push_back(std::move(cwd_));
    spec_.reset();
    if (fds->empty() && !start_check_) return;
    // Output waits until they are closed, or until kDisposeWaitUsec has passed.
    output_held_ = true;
    fds_disposed_ = std::make_shared<BlockingWorker::Completion>(guarded("descriptors closed", [this] { release_output(); }));
    server_.worker().submit([fds, check = std::move(start_check_)]() mutable {
        fds->clear();
        check.reset();
    }, fds_disposed_);
    add_timer(server_.event(), dispose_timer_, kDisposeWaitUsec, guarded("dispose timer", [this] { release_output(); }));
}

void Connection::release_output() {
    fds_disposed_.reset();
    dispose_timer_.reset();
    if (!output_held_) return;
    output_held_ = false;
    flush_output();
}

void Connection::leave_handshake() {
    if (!holds_handshake_slot_) return;
    holds_handshake_slot_ = false;
    server_.admission().leave_handshake(peer_pid());
}

void Connection::abandon() {
    // Lets go of the session without stopping it: its processes keep running (backend.h),
    // and the next run's cleanup_orphans() ends them.
    session_.reset();
    close();
}

void Connection::close() {
    if (phase_ == Phase::Closed) return;
    socket_source_.reset();
    stall_timer_.reset();
    dispose_timer_.reset();
    peer_recheck_.reset();
    start_checked_.reset();
    fds_disposed_.reset();
    output_held_ = false;
    peer_.pidfd.reset();
    // Everything that came from the client goes before it can see EOF, so that a client that
    // has seen it knows the daemon holds nothing of its own; then the socket, whose queue
    // may hold descriptors sent and never read. All of it on a worker: any close can block.
    auto fds = std::make_shared<std::vector<UniqueFd>>(std::move(start_fds_));
    start_fds_.clear();
    if (cwd_) fds->push_back(std::move(cwd_));
    auto socket = std::make_shared<UniqueFd>(std::move(socket_));
    server_.worker().submit([fds, socket, check = std::move(start_check_)]() mutable {
        fds->clear();
        check.reset();
        if (*socket) ::shutdown(socket->get(), SHUT_RDWR);
        socket->reset();
    });
    socket_eof_ = true;
    if (session_ && !stopped_) {
        // The client is gone but the session is not: finish once cleanup has run.
        ending_ = true;
        phase_ = Phase::Ending;
        close_after_stop_ = true;
        return stop_session();
    }
    leave_handshake();
    if (holds_session_slot_) {
        holds_session_slot_ = false;
        server_.admission().release_session();
    }
    phase_ = Phase::Closed;
    pty_source_.reset();
    handshake_timer_.reset();
    drain_timer_.reset();
    master_.reset();
    server_.retire(this);
}

}  // namespace ptyvisor::server
