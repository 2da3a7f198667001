#include "server/connection.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "common/linux.h"
#include "common/log.h"
#include "common/process.h"
#include "protocol/session_payloads.h"
#include "server/pty.h"
#include "server/server.h"
#include "server/session_starter.h"
#include "server/profile_choice.h"
#include "server/shell_integration.h"

namespace ptyvisor::server {

using protocol::ErrorCode;
using protocol::ExitReason;
using protocol::FrameType;

namespace {

std::uint64_t usec(std::chrono::duration<double> d) { return to_usec(d); }

// How long a bulk session's output may wait for a whole frame (connection.h): less than a
// frame at 60 Hz, lost on a person; and a flood's client wakes 100 times a second at most,
// not thousands.
constexpr std::uint64_t kBulkOutputDelayUsec = 10'000;

}  // namespace

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
        if (stage_ == Stage::Closed) return;
        if (last_frame_queued()) return close();
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
    : server_(server),
      peer_(std::move(peer)),
      serial_(server.next_serial()),
      transport_(*this, server.event(), server.worker(), std::move(socket), usec(server.config().timeouts.operation)),
      batch_(server.event(), protocol::kMaxIoPayloadSize, kBulkOutputDelayUsec,
             guarded("batch timer", [this] { flush_output(); })) {
    transport_.queue().set_version(version_);
}

Connection::~Connection() {
    // The registry outlives every connection; a session still attached forgets this one.
    if (session_) session_->detach(this, /*disconnected=*/true);
    if (snapshot_ticket_) server_.screens().cancel(snapshot_ticket_);
    server_.replies().release(peer_.cred.uid, reply_reserved_);
}

int Connection::begin() {
    const int r = transport_.begin(static_cast<int>(server_.config().limits.socket_buffer_bytes));
    if (r < 0) return r;
    return add_timer(server_.event(), handshake_timer_, usec(server_.config().timeouts.handshake),
                     guarded("handshake timer", [this] { on_handshake_timeout(); }));
}

// ---- Stages --------------------------------------------------------------------------------

namespace {

const char* to_string(Connection::Stage stage) {
    switch (stage) {
        case Connection::Stage::Handshake: return "handshake";
        case Connection::Stage::Request: return "request";
        case Connection::Stage::Relay: return "relay";
        case Connection::Stage::Closing: return "closing";
        case Connection::Stage::Closed: return "closed";
    }
    return "?";
}

// The transitions of the diagram in connection.h, and no others.
bool may_follow(Connection::Stage from, Connection::Stage to) {
    using S = Connection::Stage;
    switch (to) {
        case S::Handshake: return false;
        case S::Request:
        case S::Relay: return from == S::Handshake;
        case S::Closing: return from != S::Closing && from != S::Closed;
        case S::Closed: return from != S::Closed;
    }
    return false;
}

}  // namespace

void Connection::enter(Stage next) {
    if (!may_follow(stage_, next)) throw std::logic_error(std::string("connection stage ") + to_string(stage_) +
                                                          " cannot be followed by " + to_string(next));
    log_debug("connection stage", {{"PEER_PID", std::to_string(peer_pid())}, {"SERIAL", std::to_string(serial_)},
                                   {"FROM", to_string(stage_)}, {"TO", to_string(next)}});
    stage_ = next;
    if (next == Stage::Request) handshake_timer_.reset();  // a request is bounded by its own timeout
    // Only a handshake holds one of the admission's handshake slots.
    leave_handshake();
}

// ---- Reading the client ------------------------------------------------------------------

// Whether the socket is read now: not while a worker or the backend answers about the
// START, not once the last frame is queued, and not while the session holds as much of this
// controller's input as it may (backpressure).
bool Connection::reading() const {
    if (awaiting_answer() || last_frame_queued() || transport_.eof()) return false;
    return !(session_ && (role_ == Role::Controller || session_->held_by(this)) && session_->input_full());
}

ClientTransport::Handler::Watch Connection::watch() const {
    // Only a hang-up is watched while a worker or the backend answers: whoever asked may go.
    if (awaiting_answer()) return Watch::HangUp;
    if (transport_.eof() || last_frame_queued()) return Watch::Nothing;
    return reading() && !waiter_ ? Watch::Frames : Watch::HangUp;
}

bool Connection::may_hold_fds(std::size_t held) const { return stage_ == Stage::Handshake && held <= 1; }

void Connection::fds_refused(const char* why) { send_error(ErrorCode::WrongFdCount, why); }

void Connection::client_hung_up(bool reset) {
    // Waiting for an answer: whoever asked is gone, so is the START.
    if (awaiting_answer()) return close();
    // Only the last frame is left to send; nothing the client says matters any more.
    if (last_frame_queued()) {
        if (reset) close();
        return;
    }
    // Not reading (backpressure), but the client is gone.
    client_went_away();
}

void Connection::client_ended() {
    if (stage_ == Stage::Handshake && !waiter_)
        log_debug("client left during the handshake", {{"PEER_PID", std::to_string(peer_pid())}});
    // A client that half-closes after its request still gets the reply; otherwise it
    // is gone, and so is a session bound to it.
    if (!last_frame_queued() && !waiter_) leave_session(/*disconnected=*/true);
    if (!last_frame_queued() || !waiter_) return close();
}

void Connection::client_went_away() {
    leave_session(/*disconnected=*/true);
    close();
}

bool Connection::handle_frames() {
    protocol::Frame frame;
    for (;;) {
        if (stage_ == Stage::Closed || last_frame_queued() || awaiting_answer() || waiter_) return false;
        auto& decoder = transport_.decoder();
        const auto status = decoder.next(frame);
        if (status == protocol::FrameDecoder::Status::NeedMore) return true;
        if (status == protocol::FrameDecoder::Status::Failed) {
            send_error(decoder.error(), "malformed frame header");
            return false;
        }
        if (!version_known_) {
            version_known_ = true;
            version_ = frame.version;
            transport_.queue().set_version(version_);
        } else if (frame.version != version_) {
            send_error(ErrorCode::UnsupportedVersion, "a connection speaks one protocol version");
            return false;
        }
        handle_frame(frame);
    }
}

void Connection::handle_frame(protocol::Frame& frame) {
    if (stage_ == Stage::Relay) return handle_relay_frame(frame);
    switch (frame.type) {
        case FrameType::Start: return handle_start(frame);
        case FrameType::StatusRequest: return handle_status_request();
        case FrameType::Attach: return handle_attach(frame);
        case FrameType::List: return handle_list();
        case FrameType::Read: return handle_read(frame);
        case FrameType::Wait: return handle_wait(frame);
        case FrameType::Kill: return handle_kill(frame);
        case FrameType::Send: return handle_send(frame);
        case FrameType::Snapshot: return handle_snapshot(frame);
        case FrameType::Commands: return handle_commands(frame);
        case FrameType::Exec: return handle_exec(frame);
        case FrameType::Watch: return handle_watch(frame);
        case FrameType::Recording: return handle_recording(frame);
        default:
            return send_error(ErrorCode::UnexpectedFrame,
                              "expected START, got " + std::string(protocol::to_string(frame.type)));
    }
}

void Connection::handle_status_request() {
    if (peer_.cred.uid != 0) return send_error(ErrorCode::NotAllowed, "status is for root only");
    if (transport_.fd_count() != 0) return send_error(ErrorCode::WrongFdCount, "STATUS_REQUEST carries no descriptor");
    reply(FrameType::Status, server_.status_json());
}

// ---- Starting a session ------------------------------------------------------------------

void Connection::handle_start(const protocol::Frame& frame) {
    // The account first: anyone else learns nothing about what it sent.
    if (!SessionStarter::may_start(peer_, server_.account()))
        return send_error(ErrorCode::NotAllowed, "only the agent's account may start sessions");
    auto request = protocol::decode_start(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "START: " + request.error);
    if (transport_.fd_count() != 1)
        return send_error(ErrorCode::WrongFdCount, "START must carry exactly one descriptor, the working directory");
    set_terminal(request.value->terminal);
    const bool detach = version_ >= 2 && request.value->detach;
    const bool shell_integration = version_ >= 4 && request.value->shell_integration;
    if (std::string why; shell_integration && !integrate_shell(request.value->argv, {}, {}, why))
        return send_error(ErrorCode::BadFrame, "START: shell integration: " + why);
    // Version 6 names a profile; every version gets the default one (profile_choice.h).
    auto choice = choose_profile(server_.config(), server_.backend(), version_ >= 6 ? request.value->profile : "");
    if (choice.error) {
        // An older client cannot name a profile, so only the default's can fail it: start_failed.
        return send_error(version_ >= 6 ? *choice.error : ErrorCode::StartFailed, choice.why);
    }
    SessionStarter::Context context{server_.event(),     &server_.config(), &server_.account(), &server_.backend(),
                                    &server_.admission(), &server_.worker(), &server_.sessions(), &server_.audit()};
    SessionStarter::Callbacks callbacks;
    // `denied` goes to every version: a new error code is a compatible change (section 8), and
    // an older client reads it as internal with the policy's reason as its message.
    callbacks.refused = [this](ErrorCode code, const std::string& why) { send_error(code, why); };
    callbacks.attached = [this](Session& session) {
        session_ = &session;
        role_ = Role::Controller;
    };
    callbacks.started = [this](Session&) {
        leave_handshake();
        enter(Stage::Relay);
    };
    callbacks.answered = [this] {
        // Frames the client sent behind START were left in the decoder and the socket.
        if (handle_frames()) transport_.receive();
        else update_socket_events();
    };
    starter_ = std::make_unique<SessionStarter>(context, peer_, *this, std::move(callbacks));
    starter_->begin(std::move(*request.value), transport_.take_fd(), detach, shell_integration,
                    std::move(choice.profile));
    update_socket_events();
}

void Connection::session_started() {
    if (!session_ || relaying_ || last_frame_queued()) return;
    handshake_timer_.reset();
    relaying_ = true;
    cursor_ = session_->log().start();
    transport_.queue().push(FrameType::Started,
                            protocol::encode(protocol::Started{session_->unit(), session_->main_pid(), session_->id()}));
    flush_output();
}

void Connection::session_start_failed(const std::string& why) {
    if (relaying_) return;
    send_error(ErrorCode::StartFailed, why);
}

void Connection::on_handshake_timeout() {
    if (starter_ && starter_->waiting()) return send_error(starter_->timeout_code(), starter_->timeout_message());
    if (stage_ == Stage::Handshake && !waiter_) {
        ++server_.admission().counters().handshake_timeouts;
        return send_error(ErrorCode::HandshakeTimeout, "START did not arrive in time");
    }
    if (session_ && !relaying_) send_error(ErrorCode::StartFailed, "the command did not start in time");
}

// ---- Relay -------------------------------------------------------------------------------

void Connection::handle_relay_frame(protocol::Frame& frame) {
    if (!session_ || session_->state() == Session::State::Ended || session_->state() == Session::State::Ending)
        return;  // the session is over; late frames are dropped
    if (frame.type == FrameType::Detach) return handle_detach();
    if (frame.type == FrameType::Control) return handle_control(frame);
    const bool control = frame.type == FrameType::Input || frame.type == FrameType::Resize ||
                         frame.type == FrameType::Signal || frame.type == FrameType::Stop;
    if (!control)
        return send_error(ErrorCode::UnexpectedFrame,
                          std::string(protocol::to_string(frame.type)) + " is not allowed in a session");
    // A person holding the terminal types and resizes; the agent's controller then may not.
    const bool typing = frame.type == FrameType::Input || frame.type == FrameType::Resize;
    const bool holds = typing && session_->held_by(this);
    if (role_ != Role::Controller && !holds)
        return send_error(ErrorCode::NotAllowed, "an observer only reads; " + std::string(protocol::to_string(frame.type)) +
                                                     " is for the controller");
    if (typing && !holds && session_->holder()) return refuse_relay(frame.type);
    switch (frame.type) {
        case FrameType::Input:
            session_->write_input(frame.payload);
            return update_socket_events();
        case FrameType::Resize: {
            const auto size = protocol::decode_resize(frame.text());
            if (!size) return send_error(ErrorCode::BadFrame, "RESIZE: " + size.error);
            session_->resize(*size.value);
            return;
        }
        case FrameType::Signal: return handle_signal(frame);
        case FrameType::Stop: return session_->stop(ExitReason::Stopped);
        default: return;
    }
}

void Connection::handle_signal(const protocol::Frame& frame) {
    const auto sig = protocol::decode_signal(frame.text());
    if (!sig) return send_error(ErrorCode::BadFrame, "SIGNAL: " + sig.error);
    // Pending already: coalesced, as the kernel coalesces a standard signal.
    if (std::find(pending_signals_.begin(), pending_signals_.end(), *sig.value) != pending_signals_.end()) return;
    pending_signals_.push_back(*sig.value);
    deliver_signals();
}

// Delivers the pending SIGNALs the session's pace allows now, and arms the timer for the rest.
void Connection::deliver_signals() {
    while (!pending_signals_.empty()) {
        if (!session_ || session_->state() == Session::State::Ended || session_->state() == Session::State::Ending) {
            pending_signals_.clear();
            break;
        }
        if (const std::uint64_t wait = session_->signal_wait_usec(); wait > 0) {
            const int r = rearm_timer(server_.event(), signal_timer_, wait, guarded("signal timer", [this] { deliver_signals(); }));
            if (r < 0) return event_failed(r, "cannot arm the signal timer");
            return;
        }
        const protocol::SignalRequest request = pending_signals_.front();
        pending_signals_.erase(pending_signals_.begin());
        pid_t group = -1;
        const int e = session_->signal(request, group);
        // A signal that reaches nobody is refused, never lost: unless the command has exited,
        // when the EXIT that follows says why nothing was left to signal (an ERROR would
        // replace it and lose the exit status).
        if (e == 0 || session_->state() != Session::State::Running) continue;
        if (request.target != protocol::SignalTarget::Foreground) continue;
        return send_error(ErrorCode::NotAllowed, "SIGNAL " + std::to_string(request.signal) +
                                                     ": the terminal's foreground process group " + std::to_string(group) +
                                                     (e == -EPERM ? " is not the agent's" : " has no process in the session"));
    }
    signal_timer_.reset();
}

void Connection::session_input_room() { update_socket_events(); }

void Connection::session_changed() {
    if (waiter_) return check_wait();
    if (exec_) return check_exec();
    if (watch_) return check_watch();
    if (output_may_wait()) return;
    flush_output();
}

// Whether the session's new output may wait for more (see the invariants in connection.h):
// true when batch_ will write it.
bool Connection::output_may_wait() {
    if (!session_ || !relaying_ || !session_->bulk() || session_->state() == Session::State::Ended) return false;
    if (!transport_.queue().empty()) return false;
    return batch_.wait(session_->log().end() - cursor_);
}

void Connection::session_gone() {
    session_ = nullptr;
    if (stage_ == Stage::Closed || last_frame_queued()) return;
    if (waiter_) return finish_wait(false, "gone");
    exec_.reset();
    watch_.reset();
    wants_input_ = false;
    send_error(ErrorCode::NoSuchSession, "the session has gone");
}

void Connection::session_taken_over() {
    session_ = nullptr;  // the session has let go of this connection already
    if (stage_ == Stage::Closed || last_frame_queued()) return;
    transport_.queue().push(FrameType::Detached, protocol::encode(protocol::DetachedReply{cursor_, "taken_over"}));
    enter(Stage::Closing);
    flush_output();
}

void Connection::handle_detach() {
    if (role_ == Role::Controller) session_->make_detached();
    Session* session = session_;
    session_ = nullptr;
    session->detach(this, /*disconnected=*/false);
    server_.sessions().client_left(session);
    transport_.queue().push(FrameType::Detached, protocol::encode(protocol::DetachedReply{cursor_, "detached"}));
    enter(Stage::Closing);
    flush_output();
}

// Copies what the log holds past this client's cursor into OUTPUT frames, up to kPumpBytes
// queued; then, once the session has ended and all of it is queued, the EXIT.
void Connection::pump_output() {
    // One frame ahead of what the socket took: the queue then stays under OutputQueue's
    // kIdleCapacity and keeps its buffer, where a bigger target made it give the buffer back
    // and grow it again on every refill, for every reader (bench: observers).
    constexpr std::size_t kPumpBytes = protocol::kMaxIoPayloadSize;
    if (!session_ || !relaying_ || last_frame_queued()) return;
    const OutputLog& log = session_->log();
    OutputQueue& out = transport_.queue();
    bool advanced = false;
    if (discard_output_) cursor_ = log.end();
    if (cursor_ < log.start()) {
        // This reader fell behind the log: say so, and go on from the oldest byte held.
        out.push(FrameType::Dropped, protocol::encode(protocol::DroppedNotice{log.start(), log.start() - cursor_}));
        cursor_ = log.start();
        advanced = true;
    }
    while (out.size() < kPumpBytes && cursor_ < log.end()) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(log.end() - cursor_, protocol::kMaxIoPayloadSize));
        const auto view = log.view(cursor_, n);
        out.push_output(view.first, view.second);
        cursor_ += view.size();
        advanced = true;
    }
    if (session_->state() == Session::State::Ended && cursor_ == log.end() && !session_->failed_to_start()) {
        out.push(FrameType::Exit, protocol::encode(*exit_told(*session_)));
        enter(Stage::Closing);
    }
    if (advanced) session_->client_advanced();
}

bool Connection::queue_drained() {
    if (last_frame_queued()) {
        close();
        return false;
    }
    // The latest CONTROLLER, held back while the queue was full (push_controller).
    if (controller_untold_ && session_ && relaying_) {
        queue_controller();
        return true;
    }
    // The queue took all it had: more of the log may be waiting.
    if (session_ && relaying_ && cursor_ < session_->log().end()) {
        pump_output();
        return true;
    }
    if (session_ && relaying_ && session_->state() == Session::State::Ended) {
        pump_output();
        return last_frame_queued();
    }
    return false;
}

void Connection::client_stalled() {
    log_warning("client stalled", {{"PEER_PID", std::to_string(peer_pid())}});
    if (last_frame_queued() || !session_) return close();
    if (role_ == Role::Controller && !session_->detached()) {
        // A bound session waits for its client; one that stops reading ends it. What it
        // did not take is dropped, and the EXIT follows if it ever reads again.
        transport_.queue().drop_unsent();
        discard_output_ = true;
        session_->stop(ExitReason::ClientStalled);
        return;
    }
    // Anyone else is only cut off: the session goes on without it.
    leave_session(/*disconnected=*/false);
    close();
}

// The loop could not watch or time this connection (out of memory): it ends, as a failure
// of its own, never the daemon's.
void Connection::event_failed(int r, const char* what) {
    log_error_errno(r, what, {{"PEER_PID", std::to_string(peer_pid())}});
    close();
}

// Leaves the session this connection is attached to, if any. `disconnected`: without a
// DETACH, which ends a bound session when this is its controller.
void Connection::leave_session(bool disconnected) {
    Session* session = session_;
    if (!session) return;
    session_ = nullptr;
    if (wants_input_) session->input_watch().unwant();
    wants_input_ = false;
    if (exec_) session->set_exec_running(false);
    session->detach(this, disconnected);
    server_.sessions().client_left(session);
}

// ---- End ---------------------------------------------------------------------------------

void Connection::reply(FrameType type, const std::string& payload) {
    leave_handshake();
    transport_.queue().push(type, payload);
    enter(Stage::Closing);
    flush_output();
}

bool Connection::reserve_reply(std::size_t bytes) {
    if (!server_.replies().reserve_all(peer_.cred.uid, bytes)) return false;
    reply_reserved_ += bytes;
    return true;
}

std::size_t Connection::reserve_reply_up_to(std::size_t bytes) {
    const std::size_t granted = server_.replies().reserve(peer_.cred.uid, bytes);
    reply_reserved_ += granted;
    return granted;
}

void Connection::send_error(ErrorCode code, const std::string& message) {
    if (stage_ == Stage::Closed || last_frame_queued()) return;
    server_.admission().count_rejected(code);
    log_info("refused client", {{"CODE", std::string(protocol::to_string(code))}, {"ERROR", message},
                                {"PEER_PID", std::to_string(peer_pid())}});
    waiter_.reset();
    signal_timer_.reset();
    search_source_.reset();
    pending_signals_.clear();
    kill_signal_.reset();
    wait_timer_.reset();
    quiet_timer_.reset();
    dispose_client_fds();
    // ERROR replaces EXIT: a bound session this controls ends as if the client had gone.
    transport_.queue().drop_unsent();
    leave_session(/*disconnected=*/true);
    leave_handshake();
    transport_.queue().push(FrameType::Error, protocol::encode(protocol::ErrorReply{code, message}));
    enter(Stage::Closing);
    flush_output();
    // A client that never reads its ERROR is cut at the operation timeout.
    transport_.arm_last_frame_timer();
}

void Connection::shut_down() {
    // A relay ends with its session (the registry stops every one); anything else now.
    if (stage_ == Stage::Relay && session_ && relaying_) return;
    send_error(ErrorCode::ShuttingDown, "the daemon is stopping");
}

void Connection::evict() {
    ++server_.admission().counters().evicted;
    send_error(ErrorCode::Overloaded, "too many connections are waiting; yours was the oldest of the busiest peer");
}

// A START's directory, and its check if one runs: to be closed on a worker with what the
// client sent.
SessionStarter::Leftovers Connection::abandon_start() {
    SessionStarter::Leftovers leftovers;
    // A check still running is abandoned; its directory goes with the rest.
    if (starter_) starter_->abandon(leftovers);
    return leftovers;
}

void Connection::dispose_client_fds() {
    auto leftovers = abandon_start();
    transport_.dispose_fds(std::move(leftovers.fds), std::move(leftovers.check));
}

void Connection::leave_handshake() {
    if (!holds_handshake_slot_) return;
    holds_handshake_slot_ = false;
    server_.admission().leave_handshake(peer_pid());
}

void Connection::abandon() {
    // The registry lets go of every session itself, without stopping it: its processes keep
    // running (backend.h), and the next run's cleanup_orphans() ends them. Detached without a
    // disconnect, so that nothing is stopped from here.
    if (Session* session = session_) {
        session_ = nullptr;
        session->detach(this, /*disconnected=*/false);
    }
    close();
}

void Connection::close() {
    if (stage_ == Stage::Closed) return;
    transport_.stop();
    wait_timer_.reset();
    quiet_timer_.reset();
    signal_timer_.reset();
    search_source_.reset();
    pending_signals_.clear();
    kill_signal_.reset();
    waiter_.reset();
    peer_.pidfd.reset();
    leave_session(/*disconnected=*/true);
    // The peer's pidfd is closed above, and everything that came from the client goes with
    // the socket, before the client can see EOF (client_transport.h).
    auto leftovers = abandon_start();
    transport_.close(std::move(leftovers.fds), std::move(leftovers.check));
    leave_handshake();
    enter(Stage::Closed);
    handshake_timer_.reset();
    server_.retire(this);
}

}  // namespace ptyvisor::server
