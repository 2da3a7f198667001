// Connection: the requests of protocol version 4, command-aware sessions (COMMANDS, EXEC,
// WATCH; docs/protocol.md, section 11). The records come from the session's CommandTracker,
// the input waits from its InputWatch; the WAIT conditions of version 4 are in
// connection_requests.cpp with the others.
#include <algorithm>
#include <iterator>

#include "common/log.h"
#include "protocol/command_payloads.h"
#include "server/connection.h"
#include "server/server.h"

namespace ptyvisor::server {

using protocol::ErrorCode;
using protocol::ExecReply;
using protocol::FrameType;
using protocol::SessionEvent;

namespace {

// What a WATCH lets wait for its client before it is ended as too slow.
constexpr std::size_t kMaxWatchQueueBytes = 256 * 1024;

}  // namespace

void Connection::attach_waiting(Session& session, bool input) {
    enter(Stage::Request);
    session_ = &session;
    role_ = Role::Observer;
    cursor_ = session.log().end();  // a waiter holds nothing back
    session.attach(this, Role::Observer);
    if (input) {
        session.input_watch().want();
        wants_input_ = true;
    }
}

// ---- COMMANDS ----------------------------------------------------------------------------

void Connection::handle_commands(const protocol::Frame& frame) {
    const auto request = protocol::decode_commands(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "COMMANDS: " + request.error);
    Session* session = find_session(request.value->id, Request::Read);
    if (!session) return;
    const CommandTracker& commands = session->commands();
    protocol::CommandListReply r;
    r.id = session->id();
    r.shell = session->shell();
    r.at_prompt = commands.at_prompt();
    if (session->state() != Session::State::Ended) session->input_watch().probe_now();
    r.waiting_for_input = session->waiting_for_input();
    r.current = commands.current();
    for (const auto& record : commands.ended())
        if (record.seq > request.value->since) r.commands.push_back(record);
    r.first_seq = commands.first_seq();
    const std::string text = protocol::encode(r);
    if (!reserve_reply(text.size()))
        return send_error(ErrorCode::Busy, "too many replies are waiting for their clients to read them; try again");
    reply(FrameType::CommandList, text);
}

// ---- EXEC --------------------------------------------------------------------------------

void Connection::handle_exec(const protocol::Frame& frame) {
    auto request = protocol::decode_exec(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "EXEC: " + request.error);
    Session* session = find_session(request.value->id, Request::Send);
    if (!session) return;
    if (session->state() == Session::State::Ended || session->state() == Session::State::Ending)
        return send_error(ErrorCode::SessionEnded, "the session has exited");
    if (!session->shell() && !session->commands().has_marks())
        return send_error(ErrorCode::NoShellIntegration,
                          "the session's shell reports no commands: start it with shell integration");
    if (session->exec_running()) return send_error(ErrorCode::Busy, "another EXEC runs in this session");
    if (session->holder()) return refuse_held(*session);
    if (!session->has_reader_room())
        return send_error(ErrorCode::Busy, "the session has " + std::to_string(Session::kMaxReaders) + " readers already");
    exec_ = std::make_unique<ExecRun>();
    exec_->request = std::move(*request.value);
    session->set_exec_running(true);
    attach_waiting(*session, /*input=*/true);
    if (const int r = add_timer(server_.event(), wait_timer_, exec_->request.timeout_ms * 1000,
                                guarded("exec timeout", [this] { exec_timed_out(); }));
        r < 0)
        return event_failed(r, "cannot arm the exec timeout");
    update_socket_events();
    check_exec();
}

// Types the command once the shell is at its prompt; answers once its command has ended, or
// waits for input, or the session has ended.
void Connection::check_exec() {
    if (!exec_ || !session_) return;
    Session& session = *session_;
    const CommandTracker& commands = session.commands();
    auto& run = *exec_;
    if (session.state() == Session::State::Ended) {
        std::optional<protocol::CommandRecord> record;
        if (run.typed) {
            if (const auto* ended = commands.ended_after(run.seq_before)) record = *ended;
            else if (commands.current() && commands.current()->seq > run.seq_before) record = commands.current();
        }
        return finish_exec(ExecReply::Outcome::SessionEnded, std::move(record));
    }
    if (!run.typed) {
        if (session.state() != Session::State::Running || !commands.at_prompt() || commands.current()) return;
        // A person holds the terminal: the line waits for it to be handed back (or the timeout).
        if (session.holder()) return;
        run.typed = true;
        run.seq_before = commands.newest_seq();
        std::string line = run.request.command;
        line.push_back('\r');
        session.write_input({reinterpret_cast<const std::uint8_t*>(line.data()), line.size()});
        return;
    }
    if (const auto* ended = commands.ended_after(run.seq_before))
        return finish_exec(run.interrupting ? ExecReply::Outcome::Interrupted : ExecReply::Outcome::Exited, *ended);
    const auto& current = commands.current();
    if (run.interrupting || !session.waiting_for_input()) return;
    if (current && current->seq > run.seq_before) return finish_exec(ExecReply::Outcome::WaitingForInput, current);
    // The shell read the line and waits for more without starting a command: the line was
    // unfinished (an open quote, a trailing backslash: its continuation prompt).
    if (!current && commands.newest_seq() == run.seq_before)
        return finish_exec(ExecReply::Outcome::WaitingForInput, std::nullopt);
}

void Connection::exec_timed_out() {
    if (!exec_ || !session_) return;
    auto& run = *exec_;
    if (run.request.interrupt && run.typed && !run.interrupting && !session_->holder()) {
        run.interrupting = true;
        const std::uint8_t ctrl_c = 0x03;
        session_->write_input({&ctrl_c, 1});
        if (const int r = add_timer(server_.event(), wait_timer_, protocol::kExecInterruptGraceMs * 1000,
                                    guarded("exec interrupt", [this] { exec_timed_out(); }));
            r < 0)
            return event_failed(r, "cannot arm the exec's interrupt timer");
        return;
    }
    std::optional<protocol::CommandRecord> record;
    const auto& current = session_->commands().current();
    if (run.typed && current && current->seq > run.seq_before) record = current;
    finish_exec(ExecReply::Outcome::Timeout, std::move(record));
}

void Connection::finish_exec(ExecReply::Outcome outcome, std::optional<protocol::CommandRecord> record) {
    if (!exec_) return;
    const auto run = std::move(exec_);
    wait_timer_.reset();
    Session* session = session_;
    ExecReply r;
    r.id = run->request.id;
    r.state = outcome;
    if (record && record->ended() && (outcome == ExecReply::Outcome::Exited || outcome == ExecReply::Outcome::Interrupted))
        r.exit_code = record->exit_code;
    r.command = std::move(record);
    if (session) {
        r.offset = session->log().end();
        r.session_state = wire_state(*session);
        session->set_exec_running(false);
    }
    leave_session(/*disconnected=*/false);
    reply(FrameType::Executed, protocol::encode(r));
}

// ---- WATCH -------------------------------------------------------------------------------

void Connection::handle_watch(const protocol::Frame& frame) {
    const auto request = protocol::decode_watch(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "WATCH: " + request.error);
    Session* session = find_session(request.value->id, Request::Wait);
    if (!session) return;
    if (!session->has_reader_room())
        return send_error(ErrorCode::Busy, "the session has " + std::to_string(Session::kMaxReaders) + " readers already");
    // What has happened already is not an event: the watch starts from now.
    watch_ = std::make_unique<WatchState>();
    const CommandTracker& commands = session->commands();
    watch_->ended = commands.last_ended_seq();
    watch_->started = commands.newest_seq();
    watch_->prompts = commands.prompts();
    watch_->waits = session->input_watch().waits();
    attach_waiting(*session, /*input=*/true);
    leave_handshake();
    update_socket_events();
    check_watch();
}

void Connection::push_event(const SessionEvent& event) {
    transport_.queue().push(FrameType::Event, protocol::encode(event));
}

// Tells the client what changed since it was last told, in the order it happened.
void Connection::check_watch() {
    if (!watch_ || !session_) return;
    Session& session = *session_;
    auto& seen = *watch_;
    const CommandTracker& commands = session.commands();
    const std::uint64_t offset = session.log().end();
    // Called at every read of the session's output: only the records not told of yet are
    // looked at, found from the newest back.
    const auto& ended = commands.ended();
    auto first_new = ended.end();
    while (first_new != ended.begin() && std::prev(first_new)->seq > seen.ended) --first_new;
    for (auto record = first_new; record != ended.end(); ++record) {
        seen.started = std::max(seen.started, record->seq);  // a command that began and ended unseen: its end
        seen.ended = record->seq;
        push_event({SessionEvent::Kind::CommandEnd, offset, *record, 0, std::nullopt});
    }
    seen.ended = std::max(seen.ended, commands.last_ended_seq());  // ended records already dropped
    if (const auto& current = commands.current(); current && current->seq > seen.started) {
        seen.started = current->seq;
        push_event({SessionEvent::Kind::CommandStart, offset, current, 0, std::nullopt});
    }
    if (commands.prompts() > seen.prompts) {
        seen.prompts = commands.prompts();
        if (commands.at_prompt()) push_event({SessionEvent::Kind::Prompt, offset, std::nullopt, 0, std::nullopt});
    }
    // One event per wait, once it is believed (Session::waiting_for_input); a wait that ended
    // before that is no event.
    const InputWatch& input = session.input_watch();
    if (input.waits() > seen.waits && (session.waiting_for_input() || !input.waiting())) {
        seen.waits = input.waits();
        if (input.waiting()) push_event({SessionEvent::Kind::Input, offset, std::nullopt, *input.since_ms(), std::nullopt});
    }
    if (session.state() == Session::State::Ended) {
        watch_.reset();
        const SessionEvent exit{SessionEvent::Kind::Exit, offset, std::nullopt, 0,
                                exit_told(session)};
        leave_session(/*disconnected=*/false);
        return reply(FrameType::Event, protocol::encode(exit));
    }
    if (transport_.queue().size() > kMaxWatchQueueBytes) {
        watch_.reset();
        return send_error(ErrorCode::Busy, "the watcher fell behind its events");
    }
    flush_output();
}

}  // namespace ptyvisor::server
