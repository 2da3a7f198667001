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

}  // namespace

Connection::Connection(Server& server, UniqueFd socket, PeerIdentity peer)
    : server_(server), socket_(std::move(socket)), peer_(std::move(peer)), serial_(server.next_serial()) {}

Connection::~Connection() = default;

int Connection::begin() {
    const int size = static_cast<int>(server_.config().limits.socket_buffer_bytes);
    ::setsockopt(socket_.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    ::setsockopt(socket_.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    const int r = add_io(server_.event(), socket_source_, socket_.get(), EPOLLIN | EPOLLRDHUP,
                         [this](std::uint32_t revents) { on_socket(revents); });
    if (r < 0) return r;
    return add_timer(server_.event(), handshake_timer_, usec(server_.config().timeouts.handshake),
                     [this] { on_handshake_timeout(); });
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
    if (verifying_peer()) {
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
        // Refused descriptors are closed before the ERROR goes out: a client that has read
        // it can count on them being gone.
        if (got.control_truncated) {
            got.fds.clear();
            return send_error(ErrorCode::WrongFdCount, "ancillary data was truncated");
        }
        if (!got.fds.empty()) {
            if (phase_ != Phase::Handshake || start_fds_.size() + got.fds.size() > 1) {
                got.fds.clear();
                return send_error(ErrorCode::WrongFdCount,
                                  "exactly one descriptor may be sent, and only with START");
            }
            start_fds_.push_back(std::move(got.fds.front()));
        }
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
        if (phase_ == Phase::Closed || exit_queued_ || verifying_peer()) return false;
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
    // Judged where it is: send_error closes start_fds_ before the ERROR goes out.
    struct stat st{};
    if (::fstat(start_fds_.front().get(), &st) < 0 || !S_ISDIR(st.st_mode))
        return send_error(ErrorCode::NotADirectory, "the descriptor sent with START is not a directory");
    if (st.st_dev != request.value->cwd_dev || st.st_ino != request.value->cwd_ino)
        return send_error(ErrorCode::CwdMismatch, "the directory does not match cwd_dev and cwd_ino");
    UniqueFd cwd = std::move(start_fds_.front());
    start_fds_.clear();
    authorize_start(std::move(*request.value), std::move(cwd), false);
}

void Connection::authorize_start(protocol::StartRequest request, UniqueFd cwd, bool rechecked) {
    // Check the peer again right before start: it may have exec'd or died since accept.
    std::string why;
    auto verdict = backends::PeerVerdict::Refused;
    if (pidfd_alive(peer_.pidfd.get())) verdict = server_.backend().check_peer(peer_.view(), why);
    if (verdict == backends::PeerVerdict::Unsure && !rechecked) {
        // Perhaps the new main process of an allowed unit that the backend has not learnt
        // yet: ask it to look again, and read nothing more until it has.
        rechecked_request_ = std::move(request);
        rechecked_cwd_ = std::move(cwd);
        peer_recheck_ = std::make_shared<std::function<void()>>([this] { on_peer_rechecked(); });
        server_.backend().recheck(peer_recheck_);
        return;
    }
    // Every refusal closes the directory before its ERROR goes out.
    const auto refuse = [&](ErrorCode code, const std::string& message) {
        cwd.reset();
        send_error(code, message);
    };
    if (verdict != backends::PeerVerdict::Allowed)
        return refuse(ErrorCode::NotAllowed, why.empty() ? "the peer is gone" : why);
    auto& admission = server_.admission();
    if (!admission.reserve_session())
        return refuse(ErrorCode::Busy, "all " + std::to_string(server_.config().limits.max_sessions) +
                                           " session slots are in use");
    holds_session_slot_ = true;
    if (!admission.take_admission(now_usec(server_.event())))
        return refuse(ErrorCode::RateLimited, "too many sessions started in the last minute");
    leave_handshake();
    start_session(std::move(request), std::move(cwd));
}

void Connection::on_peer_rechecked() {
    // The backend holds a copy of peer_recheck_ while it calls us: resetting it is safe.
    peer_recheck_.reset();
    if (phase_ != Phase::Handshake || exit_queued_ || !rechecked_request_) return;
    auto request = std::move(*rechecked_request_);
    rechecked_request_.reset();
    authorize_start(std::move(request), std::move(rechecked_cwd_), true);
    // Frames the client sent behind START were left in the decoder and the socket.
    if (handle_decoded_frames()) receive();
    else update_socket_events();
}

void Connection::start_session(protocol::StartRequest request, UniqueFd cwd) {
    const auto& account = server_.account();
    PtyPair pty;
    if (const int e = open_pty(account.uid, account.gid, request.size, pty); e != 0)
        return send_error(ErrorCode::StartFailed, std::string("cannot allocate a terminal: ") + std::strerror(e));
    master_ = std::move(pty.master);

    backends::SessionSpec spec;
    spec.unit_name = server_.new_unit_name();
    spec.argv = std::move(request.argv);
    spec.env = session_environment(std::move(request.env), request.term, account);
    spec.cwd = std::move(cwd);
    spec.cwd_dev = request.cwd_dev;
    spec.cwd_ino = request.cwd_ino;
    spec.tty = std::move(pty.peer);
    spec.tty_path = pty.peer_path;
    spec.account = account;
    spec.properties = server_.config().session_properties;
    argv0_ = spec.argv.front();
    const std::string unit = spec.unit_name;

    backends::SessionEvents events;
    events.on_started = [this](pid_t pid) { on_started(pid); };
    events.on_start_failed = [this](std::string why) { on_start_failed(why); };
    events.on_exited = [this](protocol::ExitStatus s) { on_exited(std::move(s)); };
    std::string why;
    session_ = server_.backend().start(std::move(spec), std::move(events), why);
    if (!session_) return send_error(ErrorCode::StartFailed, why);
    phase_ = Phase::Starting;
    started_at_ = static_cast<std::int64_t>(std::time(nullptr));
    add_io(server_.event(), pty_source_, master_.get(), EPOLLIN, [this](std::uint32_t r) { on_pty(r); });
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
    if (verifying_peer())
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
    if (!socket_) return;
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
                            [this] { on_stalled(); });
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
    if (verifying_peer()) events |= EPOLLRDHUP;
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
    session_->stop(deadline, [this](bool ok, std::string why) { on_stopped(ok, why); });
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
    add_timer(server_.event(), drain_timer_, usec(server_.config().timeouts.drain), [this] {
        drain_expired_ = true;
        maybe_finish();
    });
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
    start_fds_.clear();
    peer_recheck_.reset();
    rechecked_cwd_.reset();
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
        rearm_timer(server_.event(), stall_timer_, usec(server_.config().timeouts.operation), [this] { close(); });
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

void Connection::leave_handshake() {
    if (!holds_handshake_slot_) return;
    holds_handshake_slot_ = false;
    server_.admission().leave_handshake(peer_pid());
}

void Connection::abandon() {
    session_.reset();  // a direct session's destructor kills and reaps synchronously
    close();
}

void Connection::close() {
    if (phase_ == Phase::Closed) return;
    socket_source_.reset();
    stall_timer_.reset();
    peer_recheck_.reset();
    // Everything that came from the client goes before it can see EOF, so that a client that
    // has seen it knows the daemon holds nothing of its own.
    start_fds_.clear();
    rechecked_cwd_.reset();
    peer_.pidfd.reset();
    if (socket_) ::shutdown(socket_.get(), SHUT_RDWR);
    socket_.reset();
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
