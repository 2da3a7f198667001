// Connection: the requests of protocol version 2 that name a session by id (ATTACH, LIST,
// READ, WAIT, KILL, SEND). Who may do what is decided by session_roles.h.
#include <sys/epoll.h>

#include <algorithm>
#include <cstring>

#include "common/linux.h"
#include "common/log.h"
#include "protocol/session_payloads.h"
#include "server/connection.h"
#include "server/server.h"
#include "server/wait_condition.h"

namespace ptyvisor::server {

using protocol::ErrorCode;
using protocol::FrameType;

namespace {


std::uint64_t resolve(const protocol::LogPosition& p, const OutputLog& log) {
    switch (p.kind) {
        case protocol::LogPosition::Kind::Start: return log.start();
        case protocol::LogPosition::Kind::Tail: return log.end();
        case protocol::LogPosition::Kind::Offset: return std::clamp(p.offset, log.start(), log.end());
    }
    return log.start();
}

}  // namespace

// What clients see of a session's state (docs/protocol.md, 9.3).
protocol::State wire_state(const Session& s) {
    switch (s.state()) {
        case Session::State::Starting: return protocol::State::Starting;
        case Session::State::Running:
        case Session::State::Ending: return protocol::State::Running;
        case Session::State::Ended: return protocol::State::Exited;
    }
    return protocol::State::Exited;
}

Access Connection::access() {
    Requester who;
    who.is_root = peer_.cred.uid == 0;
    if (peer_.cred.uid == server_.account().uid) {
        std::string why;
        who.may_start = pidfd_alive(peer_.pidfd.get()) &&
                        server_.backend().check_peer(peer_.view(), why) == backends::PeerVerdict::Allowed;
    }
    who.in_observer_group = server_.in_observer_group(peer_);
    who.in_supervisor_group = server_.in_supervisor_group(peer_);
    return access_of(who);
}

Session* Connection::find_session(const std::string& id, Request request) {
    if (!find_session_access(request)) return nullptr;
    Session* session = server_.sessions().find(id);
    if (!session) send_error(ErrorCode::NoSuchSession, "no session has the id " + id);
    return session;
}

void Connection::handle_attach(const protocol::Frame& frame) {
    const auto request = protocol::decode_attach(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "ATTACH: " + request.error);
    const auto& r = *request.value;
    Session* session = find_session(r.id, Request::List);
    if (!session) return;
    Role wanted = r.observe ? Role::Observer : Role::Controller;
    const Access access = this->access();
    bool holding = false;
    switch (decide_attach(access, wanted, session->controller() != nullptr, r.takeover)) {
        case AttachDecision::NotAllowed: return send_error(ErrorCode::NotAllowed, "only the agent may control a session");
        case AttachDecision::Busy:
            return send_error(ErrorCode::Busy, "a controller is attached; attach with takeover to take its place");
        case AttachDecision::AttachHolding:
            // A person: a reader that holds the terminal (session.h, Holder).
            wanted = Role::Observer;
            holding = true;
            break;
        case AttachDecision::Attach:
        case AttachDecision::AttachTakingOver: break;
    }
    // The agent's client that cannot hear that a person holds the terminal waits for it.
    if (wanted == Role::Controller && session->holder() && version_ < 5) return refuse_held(*session);
    if (holding && session->state() != Session::State::Running)
        return send_error(ErrorCode::SessionEnded, "the session has exited");
    if (std::string why; holding && !session->may_hold(why)) return send_error(ErrorCode::Busy, why);
    if (wanted == Role::Observer && !session->has_reader_room())
        return send_error(ErrorCode::Busy, "the session has " + std::to_string(Session::kMaxReaders) + " readers already");
    leave_handshake();
    handshake_timer_.reset();
    session_ = session;
    role_ = wanted;
    may_hold_ = access == Access::Supervise;
    set_terminal(r.terminal);
    const OutputLog& log = session->log();
    cursor_ = resolve(r.from, log);
    session->attach(this, wanted);
    enter(Stage::Relay);
    // Before relaying_: ATTACHED says that this connection holds it, and comes first.
    if (holding) session->hold(this, peer_.cred.uid);
    audit(AuditKind::Attach, *session, [&](AuditRecord& a) { a.mode = wanted == Role::Controller ? "control" : "observe"; });
    if (holding) audit(AuditKind::Takeover, *session);
    relaying_ = true;
    // A person holding the terminal asked to control it: "controller" is what it is now.
    protocol::AttachedReply reply{session->id(), session->unit(), session->main_pid(), wanted == Role::Observer && !holding,
                                  log.start(), log.end(), cursor_, wire_state(*session), session->size()};
    reply.may_control = may_hold_;
    if (const auto* h = session->holder()) {
        reply.held = true;
        reply.controller_uid = h->uid;
        reply.controller_since = h->since_ms;
    }
    transport_.queue().push(FrameType::Attached, protocol::encode(reply));
    log_info("client attached", {{"UNIT", session->unit()}, {"PEER_PID", std::to_string(peer_pid())},
                                 {"ROLE", holding ? "supervisor" : wanted == Role::Observer ? "observer" : "controller"}});
    flush_output();
}

namespace {

protocol::UsageInfo usage_info(const backends::SessionUsage& u) {
    return {u.cpu_usec,  u.memory_current,   u.memory_peak,   u.tasks_current, u.tasks_peak,
            u.oom_kills, u.tasks_limit_hits, u.io_read_bytes, u.io_write_bytes};
}

}  // namespace

void Connection::handle_list() {
    if (!find_session_access(Request::List)) return;
    // Entry by entry: what never changes in a session was encoded once (list_fixed_fields).
    std::vector<std::string> entries;
    std::size_t total = 0;
    // A probe can cost a scan of /proc (input_probe.h), so one LIST probes at most
    // kListProbes sessions, from where the last LIST stopped; the others say what their last
    // probe found. Within the default max_sessions every running session is probed each time;
    // 1000 sessions probed by one LIST held the loop for 5.7 s (docs/performance.md).
    constexpr std::size_t kListProbes = 16;
    const auto sessions = server_.sessions().all();
    const std::size_t first_probed = sessions.empty() ? 0 : server_.sessions().list_probe_cursor % sessions.size();
    server_.sessions().list_probe_cursor = first_probed + kListProbes;
    for (std::size_t i = 0; i < sessions.size(); ++i) {
        const Session* s = sessions[i];
        const bool probe = (i + sessions.size() - first_probed) % sessions.size() < kListProbes;
        protocol::SessionInfo changing;
        changing.state = wire_state(*s);
        changing.exit = exit_told(*s);
        changing.pid = s->main_pid();
        changing.start = s->log().start();
        changing.offset = s->log().end();
        changing.clients = static_cast<std::uint32_t>(s->clients());
        changing.detached = s->detached();
        changing.shell = s->shell();
        changing.at_prompt = s->commands().at_prompt();
        changing.last_command = s->commands().last();
        if (const auto* h = s->holder()) {
            changing.held = true;
            changing.controller_uid = h->uid;
            changing.controller_since = h->since_ms;
        }
        changing.recording = s->recorded();
        if (const auto usage = s->usage()) changing.usage = usage_info(*usage);
        // Probed for this reply (input_watch.h): LIST is one of the times someone asks.
        if (Session* probed = server_.sessions().find(s->id()); probed && s->state() == Session::State::Running) {
            if (probe) probed->input_watch().probe_now();
            changing.waiting_for_input = probed->waiting_for_input();
            if (changing.waiting_for_input) changing.waiting_since = probed->input_watch().since_ms();
        }
        entries.push_back(protocol::session_entry(s->list_fixed_fields(), changing));
        total += entries.back().size() + 1;
    }
    // Too many to say at once: the newest that fit are kept, and the reply says it was cut.
    constexpr std::size_t kEnvelope = 64;  // {"sessions":[ ... ],"truncated":true}
    bool truncated = false;
    std::size_t drop = 0;
    while (total + kEnvelope > protocol::kMaxStatusPayloadSize && drop < entries.size()) {
        total -= entries[drop].size() + 1;
        ++drop;
        truncated = true;
    }
    entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(drop));
    std::optional<std::string> role;
    if (version_ >= 5) role = std::string(role_name(access()));
    const std::string text = protocol::encode_sessions(entries, truncated, role);
    if (!reserve_reply(text.size()))
        return send_error(ErrorCode::Busy, "too many replies are waiting for their clients to read them; try again");
    reply(FrameType::Sessions, text);
}

bool Connection::find_session_access(Request request) {
    if (version_ < 2) {
        send_error(ErrorCode::UnexpectedFrame, "this request needs protocol version 2");
        return false;
    }
    if (transport_.fd_count() != 0) {
        send_error(ErrorCode::WrongFdCount, "only START carries a descriptor");
        return false;
    }
    if (!may(access(), request)) {
        send_error(ErrorCode::NotAllowed, "this peer may not do that to a session");
        return false;
    }
    return true;
}

void Connection::handle_read(const protocol::Frame& frame) {
    const auto request = protocol::decode_read(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "READ: " + request.error);
    Session* session = find_session(request.value->id, Request::Read);
    if (!session) return;
    const OutputLog& log = session->log();
    const std::uint64_t from = resolve(request.value->from, log);
    // As much as the reply budget leaves (reply_budget.h): a shorter LOG says where to read on.
    const std::uint64_t wanted = std::min(request.value->max_bytes, log.end() - from);
    const std::uint64_t length = wanted == 0 ? 0 : reserve_reply_up_to(static_cast<std::size_t>(wanted));
    if (wanted > 0 && length == 0)
        return send_error(ErrorCode::Busy, "too many replies are waiting for their clients to read them; try again");
    protocol::LogReply reply{session->id(), log.start(), from, length, log.end(), wire_state(*session),
                             exit_told(*session)};
    leave_handshake();
    transport_.queue().push(FrameType::Log, protocol::encode(reply));
    for (std::uint64_t at = from; at < from + length;) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(from + length - at, protocol::kMaxIoPayloadSize));
        const auto view = log.view(at, n);
        transport_.queue().push_output(view.first, view.second);
        at += view.size();
    }
    enter(Stage::Closing);
    flush_output();
}

void Connection::handle_wait(const protocol::Frame& frame) {
    auto request = protocol::decode_wait(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "WAIT: " + request.error);
    using For = protocol::WaitRequest::For;
    const For what = request.value->what;
    const bool of_version_4 = what == For::Command || what == For::Prompt || what == For::Input;
    if (of_version_4 && version_ < 4)
        return send_error(ErrorCode::BadFrame, "WAIT: 'for' must be \"exit\", \"quiet\" or \"text\" before version 4");
    Session* session = find_session(request.value->id, Request::Wait);
    if (!session) return;
    if (!session->has_reader_room())
        return send_error(ErrorCode::Busy, "the session has " + std::to_string(Session::kMaxReaders) + " readers already");
    auto waiter = std::make_unique<WaitCondition>();
    waiter->request = std::move(*request.value);
    if (waiter->request.what == protocol::WaitRequest::For::Text) {
        std::string why;
        if (!waiter->compile(why))
            return send_error(ErrorCode::BadFrame, "WAIT: 'pattern' is not a valid expression: " + why);
        waiter->scanned = waiter->search_floor = resolve(waiter->request.from, session->log());
    }
    waiter->seen_end = session->log().end();
    // The next command to end, unless the client names the one it has seen last.
    waiter->after = waiter->request.after.value_or(session->commands().last_ended_seq());
    attach_waiting(*session, /*input=*/what == For::Input);
    waiter_ = std::move(waiter);
    if (const int r = add_timer(server_.event(), wait_timer_, waiter_->request.timeout_ms * 1000,
                                guarded("wait timeout", [this] { finish_wait(false, "timeout"); }));
        r < 0)
        return event_failed(r, "cannot arm the wait timeout");
    if (waiter_->request.what == protocol::WaitRequest::For::Quiet) {
        if (const int r = add_timer(server_.event(), quiet_timer_, waiter_->request.quiet_ms * 1000,
                                    guarded("quiet", [this] { finish_wait(true, "quiet"); }));
            r < 0)
            return event_failed(r, "cannot arm the quiet timer");
    }
    update_socket_events();
    check_wait();
}

void Connection::handle_kill(const protocol::Frame& frame) {
    const auto request = protocol::decode_kill(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "KILL: " + request.error);
    Session* session = find_session(request.value->id, Request::Kill);
    if (!session) return;
    const auto& r = *request.value;
    audit(AuditKind::Kill, *session, [&](AuditRecord& a) {
        if (r.signal != 0) a.signal = r.signal;
    });
    if (r.signal != 0) {
        kill_signal_ = KillSignal{session->id(), r.signal};
        return deliver_kill_signal();
    }
    // No signal: end the session as STOP does, and answer once it has ended.
    if (!session->has_reader_room())
        return send_error(ErrorCode::Busy, "the session has " + std::to_string(Session::kMaxReaders) + " readers already");
    auto waiter = std::make_unique<WaitCondition>();
    waiter->kill = true;
    waiter->request.what = protocol::WaitRequest::For::Exit;
    attach_waiting(*session, /*input=*/false);
    waiter_ = std::move(waiter);
    update_socket_events();
    session->stop(protocol::ExitReason::Stopped);
    if (waiter_) check_wait();
}

// KILL with a signal: delivered at the session's pace (Session::signal_wait_usec), like a
// controller's SIGNAL; the socket is not read meanwhile (awaiting_answer).
void Connection::deliver_kill_signal() {
    if (!kill_signal_) return;
    Session* session = server_.sessions().find(kill_signal_->id);
    if (!session) {
        kill_signal_.reset();
        return send_error(ErrorCode::NoSuchSession, "the session has gone");
    }
    if (session->state() == Session::State::Ended) {
        kill_signal_.reset();
        return send_error(ErrorCode::SessionEnded, "the session has exited");
    }
    if (const std::uint64_t wait = session->signal_wait_usec(); wait > 0) {
        const int r = rearm_timer(server_.event(), signal_timer_, wait, guarded("kill signal timer", [this] { deliver_kill_signal(); }));
        if (r < 0) return event_failed(r, "cannot arm the signal timer");
        return update_socket_events();
    }
    const int signal = kill_signal_->signal;
    kill_signal_.reset();
    signal_timer_.reset();
    pid_t group = -1;
    const int e = session->signal({signal, protocol::SignalTarget::Session}, group);
    if (e == -EPERM) return send_error(ErrorCode::NotAllowed, "no process of the session is the agent's");
    reply(FrameType::Killed, protocol::encode(protocol::KillReply{session->id(), wire_state(*session), {}}));
}

void Connection::handle_send(const protocol::Frame& frame) {
    const auto request = protocol::decode_send(frame.payload);
    if (!request) return send_error(ErrorCode::BadFrame, "SEND: " + request.error);
    Session* session = find_session(request.value->id, Request::Send);
    if (!session) return;
    if (session->state() == Session::State::Ended || session->state() == Session::State::Ending)
        return send_error(ErrorCode::SessionEnded, "the session has exited");
    if (session->holder()) return refuse_held(*session);
    if (session->input_full()) return send_error(ErrorCode::Busy, "the session's input is full; try again");
    session->write_input(request.value->input);
    audit(AuditKind::Send, *session, [&](AuditRecord& a) {
        a.text.assign(request.value->input.begin(), request.value->input.end());
    });
    reply(FrameType::Sent, protocol::encode(protocol::SentReply{request.value->input.size()}));
}

// Whether what the waiter waits for holds now; answers if it does.
void Connection::check_wait() {
    if (!waiter_ || !session_) return;
    const Session& session = *session_;
    const OutputLog& log = session.log();
    cursor_ = log.end();
    auto& w = *waiter_;
    using For = protocol::WaitRequest::For;
    if (w.request.what == For::Text) {
        switch (w.search(log, w.search_floor)) {
            case WaitCondition::Found::Match: return finish_wait(true, "text");
            case WaitCondition::Found::More: {
                // The rest on a later turn, behind keystrokes (wait_condition.h).
                search_source_.reset();
                const int r = add_defer(server_.event(), search_source_, guarded("search", [this] { check_wait(); }));
                if (r < 0) return event_failed(r, "cannot schedule the rest of the search");
                sd_event_source_set_priority(search_source_.get(), Session::kBulkEventPriority);
                return;  // not "exited" before the rest of the log has been searched
            }
            case WaitCondition::Found::Nothing: break;
        }
    }
    if (w.request.what == For::Quiet && log.end() != w.seen_end) {
        // Output: the quiet starts over.
        w.seen_end = log.end();
        if (const int r = rearm_timer(server_.event(), quiet_timer_, w.request.quiet_ms * 1000,
                                      guarded("quiet", [this] { finish_wait(true, "quiet"); }));
            r < 0)
            return event_failed(r, "cannot arm the quiet timer");
    }
    if (w.request.what == For::Command) {
        if (const auto* record = session.commands().ended_after(w.after)) {
            w.command = *record;
            return finish_wait(true, "command");
        }
    }
    if (w.request.what == For::Prompt && session.commands().at_prompt()) return finish_wait(true, "prompt");
    if (w.request.what == For::Input && session.waiting_for_input()) return finish_wait(true, "input");
    if (session.state() == Session::State::Ended) {
        if (w.kill || w.request.what == For::Exit) return finish_wait(true, "exit");
        return finish_wait(false, "exited");
    }
}

void Connection::finish_wait(bool matched, std::string reason) {
    if (!waiter_) return;
    auto w = std::move(waiter_);
    wait_timer_.reset();
    quiet_timer_.reset();
    search_source_.reset();
    Session* session = session_;
    leave_session(/*disconnected=*/false);
    if (w->kill) {
        if (!session) return send_error(ErrorCode::NoSuchSession, "the session has gone");
        return reply(FrameType::Killed,
                     protocol::encode(protocol::KillReply{session->id(), wire_state(*session),
                                                          exit_told(*session)}));
    }
    protocol::WaitReply r;
    r.matched = matched;
    r.reason = std::move(reason);
    r.match_start = w->match_start;
    r.match_end = w->match_end;
    r.command = std::move(w->command);
    r.state = protocol::State::Exited;
    if (session) {
        r.state = wire_state(*session);
        r.exit = exit_told(*session);
        r.offset = session->log().end();
    }
    reply(FrameType::Waited, protocol::encode(r));
}

}  // namespace ptyvisor::server
