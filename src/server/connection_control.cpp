// Connection: the requests of protocol version 5 (docs/protocol.md, section 12): a person at
// the wheel (CONTROL, CONTROLLER, REFUSED) and recordings (RECORDING, CAST). Who may hold a
// terminal is decided by session_roles.h; the hold itself is the session's (Session::Holder).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/event.h"
#include "common/log.h"
#include "protocol/control_payloads.h"
#include "server/connection.h"
#include "server/recording.h"
#include "server/server.h"

namespace ptyvisor::server {

using protocol::ErrorCode;
using protocol::FrameType;

// SESSIONS' `role` (version 5): what this peer is to the sessions.
std::string_view Connection::role_name(Access access) const {
    switch (access) {
        case Access::Control: return "agent";
        case Access::Supervise: return peer_.cred.uid == 0 ? "root" : "supervisor";
        case Access::Observe: return "observer";
        case Access::None: break;
    }
    return "none";
}

// A request of the agent's that would type into, or resize, a terminal a person holds.
void Connection::refuse_held(Session& session) {
    session.count_refused();
    const auto* h = session.holder();
    const std::string who = "a person (uid " + std::to_string(h ? h->uid : 0) + ") holds this terminal";
    if (version_ >= 5) return send_error(ErrorCode::HeldBySupervisor, who + "; try again once it is handed back");
    send_error(ErrorCode::Busy, who + "; try again later");
}

std::optional<protocol::ExitStatus> Connection::exit_told(const Session& session) const {
    // exit_status() is set as the session ends, and only then.
    return protocol::exit_status_for_version(session.exit_status(), version_);
}

void Connection::audit(AuditKind kind, const Session& session, const std::function<void(AuditRecord&)>& fill) {
    AuditRecord r;
    r.kind = kind;
    r.session = session.id();
    r.peer_pid = peer_.cred.pid;
    r.peer_uid = peer_.cred.uid;
    if (fill) fill(r);
    server_.audit().record(std::move(r));
}

void Connection::handle_control(const protocol::Frame& frame) {
    const auto request = protocol::decode_control(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "CONTROL: " + request.error);
    if (!may_hold_ || role_ != Role::Observer)
        return send_error(ErrorCode::NotAllowed,
                          "only a supervisor (supervisor_group, or root) attached as an observer takes the terminal");
    if (!request.value->take) {
        // Nothing to hand back is no error: the reply says who holds it.
        if (!session_->held_by(this)) return push_controller();
        return session_->release(this);  // tells every client, this one included
    }
    if (session_->held_by(this)) return push_controller();
    if (std::string why; !session_->may_hold(why)) {
        transport_.queue().push(FrameType::Refused,
                                protocol::encode(protocol::RefusedNotice{"busy", why, "control", 1}));
        return flush_output();
    }
    session_->hold(this, peer_.cred.uid);
    audit(AuditKind::Takeover, *session_);
}

// Every client attached to the session is told; those of version 5 in a relay hear CONTROLLER.
// A waiting EXEC may now type its line.
void Connection::control_changed() {
    if (exec_) return check_exec();
    if (version_ < 5 || !session_ || !relaying_ || last_frame_queued() || stage_ != Stage::Relay) return;
    push_refused_count();
    push_controller();
}

void Connection::push_controller() {
    // A client that does not read, while a person takes and hands back in a loop, would make
    // the daemon queue a notice per change: past one frame's worth queued, only the latest
    // state is told, once the queue has drained (queue_drained).
    if (transport_.queue().size() > protocol::kMaxIoPayloadSize) {
        controller_untold_ = true;
        return;
    }
    queue_controller();
    flush_output();
}

void Connection::queue_controller() {
    controller_untold_ = false;
    protocol::ControllerNotice notice;
    if (const auto* h = session_->holder()) {
        notice.controller = protocol::ControllerNotice::Kind::Supervisor;
        notice.uid = h->uid;
        notice.since = h->since_ms;
        notice.you = h->client == this;
    }
    transport_.queue().push(FrameType::Controller, protocol::encode(notice));
}

// The agent's INPUT or RESIZE while a person holds the terminal: never carried out, never
// silent. A flood of them costs one REFUSED a second (with the count), not one each.
void Connection::refuse_relay(FrameType type) {
    session_->count_refused();
    ++refused_pending_;
    constexpr std::uint64_t kRefusedEveryUsec = 1'000'000;
    const std::uint64_t now = now_usec(server_.event());
    if (refused_told_usec_ != 0 && now - refused_told_usec_ < kRefusedEveryUsec) return;
    refused_told_usec_ = now;
    tell_refused(type);
}

void Connection::tell_refused(FrameType type) {
    const auto* h = session_->holder();
    const std::string message = "a person (uid " + std::to_string(h ? h->uid : 0) + ") holds this terminal; " +
                                std::to_string(refused_pending_) + " frame(s) of input or resize were not carried out";
    transport_.queue().push(FrameType::Refused,
                            protocol::encode(protocol::RefusedNotice{std::string(protocol::to_string(ErrorCode::HeldBySupervisor)),
                                                                     message, type == FrameType::Resize ? "resize" : "input",
                                                                     refused_pending_}));
    refused_pending_ = 0;
    flush_output();
}

// What was refused since the last REFUSED, said before the terminal changes hands.
void Connection::push_refused_count() {
    if (refused_pending_ > 0) tell_refused(FrameType::Input);
}

// RECORDING: a part of a session's asciicast file, for people (observers, supervisors, root):
// the agent's own recording is kept where it cannot touch it, and it does not read it either.
void Connection::handle_recording(const protocol::Frame& frame) {
    const auto request = protocol::decode_recording(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "RECORDING: " + request.error);
    if (!find_session_access(Request::Read)) return;
    if (access() == Access::Control) return send_error(ErrorCode::NotAllowed, "recordings are for observers and supervisors");
    const auto& r = *request.value;
    // A root-owned regular file in the daemon's own directory, by a name that is a session id
    // (checked by the decoder): not a path a client chose, so opening it cannot block on a
    // FIFO or a FUSE mount of the agent's (recording.h).
    UniqueFd file = server_.recordings().open_for_reading(r.id);
    if (!file) return send_error(ErrorCode::NoSuchSession, "no recording of session " + r.id);
    struct stat st{};
    if (::fstat(file.get(), &st) < 0 || !S_ISREG(st.st_mode))
        return send_error(ErrorCode::Internal, "the recording cannot be read");
    const auto size = static_cast<std::uint64_t>(st.st_size);
    const std::uint64_t offset = std::min(r.offset, size);
    const std::uint64_t wanted = std::min(r.max_bytes, size - offset);
    const std::uint64_t granted = wanted == 0 ? 0 : reserve_reply_up_to(static_cast<std::size_t>(wanted));
    if (wanted > 0 && granted == 0)
        return send_error(ErrorCode::Busy, "too many replies are waiting for their clients to read them; try again");
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(granted));
    std::size_t got = 0;
    while (got < bytes.size()) {
        const ssize_t n = ::pread(file.get(), bytes.data() + got, bytes.size() - got, static_cast<off_t>(offset + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return send_error(ErrorCode::Internal, std::string("the recording cannot be read: ") + std::strerror(errno));
        if (n == 0) break;  // cut shorter since fstat: say what was read
        got += static_cast<std::size_t>(n);
    }
    leave_handshake();
    transport_.queue().push(FrameType::Cast, protocol::encode(protocol::CastReply{r.id, offset, got, size}));
    for (std::size_t at = 0; at < got;) {
        const std::size_t n = std::min<std::size_t>(got - at, protocol::kMaxIoPayloadSize);
        transport_.queue().push_output({bytes.data() + at, n}, {});
        at += n;
    }
    enter(Stage::Closing);
    flush_output();
}

}  // namespace ptyvisor::server
