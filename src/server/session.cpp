#include "server/session.h"

#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>

#include "common/log.h"
#include "protocol/session_payloads.h"
#include "server/audit_log.h"
#include "server/pty.h"
#include "server/recording.h"
#include "server/screen_broker.h"

namespace ptyvisor::server {

using protocol::ExitReason;

namespace {

std::uint64_t usec(std::chrono::duration<double> d) { return to_usec(d); }

// One daemon thread relays every session. A terminal that floods yields the loop after this
// much output per input event, so that the keystrokes and echoes of the other sessions wait
// for a few reads at most. It exceeds the line discipline's 4 KiB buffer (see read_terminal).
constexpr std::size_t kReadBudgetPerDispatch = 16 * 1024;
// The budget of a terminal that may wait for its kworker (see read_terminal): it delays no
// other flood, and larger batches make fewer, larger OUTPUT frames.
constexpr std::size_t kWaitingReadBudgetPerDispatch = 64 * 1024;
// A terminal that gave at least this much in one event is bulk: a flood, a build log, not a
// person's echo. sd-event dispatches pending sources of a lower priority value first, so a
// bulk terminal waits behind every interactive terminal and every client connection (where
// keystrokes come from) until an event of its own gives less again.
constexpr std::size_t kBulkBytesPerDispatch = 2048;
constexpr std::int64_t kInteractivePriority = SD_EVENT_PRIORITY_NORMAL;
constexpr std::int64_t kBulkPriority = Session::kBulkEventPriority;
static_assert(kBulkPriority > kInteractivePriority);
// Bulk terminals of this process (one event loop): whether a read may wait (read_terminal).
std::size_t g_bulk_terminals = 0;
// How many reads in a row must say EIO before the terminal counts as closed (read_terminal).
constexpr int kHangupReads = 3;

// The 32 hex digits of "<prefix>-<32 hex>.service".
std::string id_of_unit(const std::string& unit) {
    const auto dash = unit.rfind('-');
    const auto dot = unit.rfind('.');
    if (dash == std::string::npos || dot == std::string::npos || dot <= dash) return unit;
    return unit.substr(dash + 1, dot - dash - 1);
}

}  // namespace

// A failure inside one session's callback ends that session, never the daemon.
template <class F>
auto Session::guarded(const char* where, F f) {
    return [this, where, f = std::move(f)](auto&&... args) {
        try {
            f(std::forward<decltype(args)>(args)...);
        } catch (const std::exception& e) {
            log_error("session failed", {{"UNIT", unit_}, {"WHERE", where}, {"ERROR", e.what()}});
            try {
                stop(ExitReason::BackendFailed);
            } catch (...) {
            }
        } catch (...) {
            log_error("session failed", {{"UNIT", unit_}, {"WHERE", where}});
        }
    };
}

template <class F>
void Session::tell(F f) {
    for (LogFollower* follower : byte_followers())
        if (follower) f(*follower);
    const auto clients = clients_;
    for (const auto& [client, role] : clients) f(*client);
}

std::array<LogFollower*, 2> Session::byte_followers() const { return {context_.screens, recorder_.get()}; }

Session::Session(const SessionContext& context, SessionOwner& owner, std::string unit, bool detached)
    : context_(context),
      owner_(owner),
      unit_(std::move(unit)),
      id_(id_of_unit(unit_)),
      detached_(detached),
      input_watch_(context.event, guarded("input watch", [this] { notify_clients(); }),
                   [this] { return log_ ? log_->end() : 0; }) {}

Session::~Session() {
    set_bulk(false);
    tell([this](LogFollower& f) { f.log_closed(*this); });
    release_slot();
    // Whoever is still attached learns it before the pointer dangles.
    const auto clients = clients_;
    clients_.clear();
    controller_ = nullptr;
    for (const auto& [client, role] : clients) client->session_gone();
}

bool Session::start(backends::SessionSpec spec, protocol::WindowSize size, SessionClient* starter,
                    pid_t starter_pid, std::string& why) {
    starter_pid_ = starter_pid;
    holds_slot_ = true;  // reserved by the starter, ours from now on
    created_ = static_cast<std::int64_t>(std::time(nullptr));
    argv_ = spec.argv;
    if (spec.profile) {
        profile_name_ = spec.profile->name;
        runtime_max_ = spec.profile->runtime_max;
        idle_timeout_ = spec.profile->idle_timeout;
    }
    cwd_ = spec.cwd_path;
    size_ = size;
    attach(starter, Role::Controller);
    const auto fail = [&](std::string reason) {
        why = std::move(reason);
        start_failed_ = true;
        finish(protocol::ExitStatus{});
        return false;
    };
    if (const int r = OutputLog::create(id_, context_.config->limits.output_log_bytes, log_); r < 0)
        return fail(std::string("cannot allocate the output log: ") + std::strerror(-r));
    PtyPair pty;
    if (const int e = open_pty(spec.account.uid, context_.terminal_group, size, pty); e != 0)
        return fail(std::string("cannot allocate a terminal: ") + std::strerror(-e));
    master_ = std::move(pty.master);
    input_watch_.set_terminal(master_.get());
    if (context_.recordings) recorder_ = context_.recordings->start(id_, spec.argv, spec.env, size);
    recorded_ = recorder_ != nullptr;
    spec.unit_name = unit_;
    spec.tty = std::move(pty.peer);
    spec.tty_path = pty.peer_path;

    backends::SessionEvents events;
    events.on_started = guarded("session started", [this](pid_t pid) { on_started(pid); });
    events.on_start_failed = guarded("session start failed", [this](std::string w) { on_start_failed(w); });
    events.on_exited = guarded("session exited", [this](protocol::ExitStatus s) { on_exited(std::move(s)); });
    std::string backend_why;
    processes_ = context_.backend->start(std::move(spec), std::move(events), backend_why);
    if (!processes_) return fail(backend_why);
    if (const int r = add_io(context_.event, terminal_source_, master_.get(), 0,
                             guarded("terminal", [this](std::uint32_t revents) { on_terminal(revents); }));
        r < 0) {
        // Without a watch on its terminal the session cannot run: end it as a stop does.
        stop(ExitReason::OutputFailed);
        why = std::string("cannot watch the terminal: ") + std::strerror(-r);
        return false;
    }
    describe_source(terminal_source_, "terminal " + id_);
    tell([this](LogFollower& f) { f.log_opened(*this); });
    return true;
}

// ---- Starting ----------------------------------------------------------------------------

void Session::on_started(pid_t pid) {
    if (stage_ != Stage::Starting) return;
    started_ = true;
    enter(Stage::Running);
    context_.admission->count_start(std::nullopt);  // an adopted session is no new start
    main_pid_ = pid;
    log_info("session started", {{"UNIT", unit_}, {"MAIN_PID", std::to_string(pid)}});
    const auto clients = clients_;
    for (const auto& [client, role] : clients) client->session_started();
    store_for_handover(false);
    start_limit_timers();
    write_held_input();
    update_terminal_events();
    if (stop_after_start_) stop(ExitReason::Stopped);
}

// runtime_max and idle_timeout are the server's to enforce, on both backends alike: the EXIT
// reason then says which limit ended the session.
void Session::start_limit_timers() {
    last_activity_usec_ = now_usec(context_.event);
    if (runtime_max_) {
        const auto after = static_cast<std::uint64_t>(runtime_max_->count()) * 1000000;
        if (add_timer(context_.event, runtime_timer_, after,
                      guarded("runtime limit", [this] { stop(ExitReason::RuntimeLimit); })) < 0)
            log_error("cannot arm the session's runtime limit; ending it", {{"UNIT", unit_}});
        else describe_source(runtime_timer_, "runtime limit " + id_);
        if (!runtime_timer_) return stop(ExitReason::RuntimeLimit);  // never unconfined
    }
    if (idle_timeout_) {
        const auto after = static_cast<std::uint64_t>(idle_timeout_->count()) * 1000000;
        if (add_timer(context_.event, idle_timer_, after, guarded("idle timeout", [this] { on_idle_timer(); })) < 0)
            log_error("cannot arm the session's idle timeout; ending it", {{"UNIT", unit_}});
        else describe_source(idle_timer_, "idle timeout " + id_);
        if (!idle_timer_) return stop(ExitReason::IdleTimeout);
    }
}

// The timer is not moved at every byte (a flood would re-arm it thousands of times a second):
// when it fires, it looks at the last activity and waits the rest, or ends the session.
void Session::on_idle_timer() {
    idle_timer_.reset();
    if (ending() || !idle_timeout_) return;
    const std::uint64_t idle = static_cast<std::uint64_t>(idle_timeout_->count()) * 1000000;
    const std::uint64_t now = now_usec(context_.event);
    const std::uint64_t quiet = now - std::min(now, last_activity_usec_);
    if (quiet >= idle) return stop(ExitReason::IdleTimeout);
    if (add_timer(context_.event, idle_timer_, idle - quiet, guarded("idle timeout", [this] { on_idle_timer(); })) < 0)
        return stop(ExitReason::IdleTimeout);
    describe_source(idle_timer_, "idle timeout " + id_);
}

void Session::on_start_failed(const std::string& why) {
    log_warning("session failed to start", {{"UNIT", unit_}, {"ERROR", why}});
    start_failed_ = true;
    context_.admission->count_start(protocol::ErrorCode::StartFailed);
    const auto clients = clients_;
    for (const auto& [client, role] : clients) client->session_start_failed(why);
    // The unit may hold something still: clean it up as for any end.
    stop(ExitReason::BackendFailed);
}

// ---- Clients -----------------------------------------------------------------------------

void Session::attach(SessionClient* client, Role role) {
    if (role == Role::Controller) {
        if (SessionClient* previous = controller_) {
            std::erase_if(clients_, [previous](const auto& c) { return c.first == previous; });
            controller_ = nullptr;
            previous->session_taken_over();
        }
        controller_ = client;
        reattach_timer_.reset();  // an adopted session's controller is back
    }
    clients_.emplace_back(client, role);
    update_terminal_events();
}

void Session::detach(SessionClient* client, bool disconnected) {
    std::erase_if(clients_, [client](const auto& c) { return c.first == client; });
    release(client);
    if (controller_ != client) return;
    controller_ = nullptr;
    if (!detached_ && disconnected) return stop(ExitReason::Disconnected);
    update_terminal_events();  // nobody holds the session back any more
}

bool Session::may_hold(std::string& why) const {
    if (controller_ && controller_->protocol_version() < 2) {
        why = "the agent's client speaks protocol version 1, which cannot be told that a person took its terminal";
        return false;
    }
    return true;
}

void Session::hold(SessionClient* client, std::int64_t uid) {
    if (SessionClient* agent = controller_; agent && agent != client) {
        if (agent->protocol_version() < 5) {
            // It cannot hear CONTROLLER or REFUSED: let it go, as a takeover does, and keep the
            // session (it no longer ends with that connection). It may attach again later.
            std::erase_if(clients_, [agent](const auto& c) { return c.first == agent; });
            controller_ = nullptr;
            make_detached();
            agent->session_taken_over();
        }
    }
    if (holder_ && holder_->client == client) return;
    if (holder_) {
        log_control_end();
        // Another person had it. One whose client cannot hear CONTROLLER is let go, as the agent's.
        if (SessionClient* previous = holder_->client; previous->protocol_version() < 5) {
            holder_.reset();
            std::erase_if(clients_, [previous](const auto& c) { return c.first == previous; });
            previous->session_taken_over();
        }
    }
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    holder_ = Holder{client, uid, std::chrono::duration_cast<std::chrono::milliseconds>(now).count(), 0};
    log_info("a person took the terminal", {{"UNIT", unit_}, {"SUPERVISOR_UID", std::to_string(uid)}});
    tell_control_changed();
}

void Session::release(SessionClient* client) {
    if (!holder_ || holder_->client != client) return;
    log_control_end();
    holder_.reset();
    tell_control_changed();
}

void Session::log_control_end() {
    log_info("the terminal was handed back to the agent",
             {{"UNIT", unit_}, {"SUPERVISOR_UID", std::to_string(holder_->uid)},
              {"REFUSED_FRAMES", std::to_string(holder_->refused)}});
}

void Session::tell_control_changed() {
    const auto clients = clients_;  // a client may detach while it is told
    for (const auto& [c, role] : clients) c->control_changed();
    update_terminal_events();
}

void Session::make_detached() {
    detached_ = true;
    if (stored_) store_for_handover(true);  // the next run must know it is detached
    update_terminal_events();
}

const std::string& Session::list_fixed_fields() const {
    if (list_fixed_fields_.empty()) {
        protocol::SessionInfo info;
        info.id = id_;
        info.unit = unit_;
        info.argv = argv_;
        info.cwd = cwd_;
        info.created = created_;
        info.profile = profile_name_;
        list_fixed_fields_ = protocol::session_fixed_fields(info);
    }
    return list_fixed_fields_;
}

void Session::client_advanced() { update_terminal_events(); }

void Session::notify_changed() {
    tell([this](LogFollower& f) { f.log_changed(*this); });
}

void Session::notify_clients() {
    const auto clients = clients_;
    for (const auto& [client, role] : clients) client->session_changed();
}

// ---- Commands ----------------------------------------------------------------------------

void Session::shell_mark(const ShellMark& mark) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto change = commands_.apply(mark, std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
    if (change.any()) notify_clients();
}

void Session::screen_advanced(std::uint64_t offset) {
    const bool was = waiting_for_input();
    screen_read_to_ = std::max(screen_read_to_, offset);
    if (!was && waiting_for_input()) notify_clients();
}

bool Session::waiting_for_input() const {
    if (!input_watch_.waiting()) return false;
    if (!shell_ && !commands_.has_marks()) return true;
    return screen_read_to_ >= input_watch_.wait_log_end();
}

// ---- Input -------------------------------------------------------------------------------

void Session::write_input(std::span<const std::uint8_t> bytes) {
    if (ending()) return;  // late input is dropped
    bytes_in_ += bytes.size();
    if (idle_timeout_) last_activity_usec_ = now_usec(context_.event);
    held_input_.insert(held_input_.end(), bytes.begin(), bytes.end());
    if (stage_ == Stage::Running) write_held_input();
}

void Session::answer_queries(std::span<const std::uint8_t> bytes) {
    if (stage_ != Stage::Running || input_full()) return;
    held_input_.insert(held_input_.end(), bytes.begin(), bytes.end());
    write_held_input();
}

bool Session::input_full() const { return held_input_.size() >= context_.config->limits.held_input_bytes; }

void Session::write_held_input() {
    const bool was_full = input_full();
    while (!held_input_.empty() && master_ && !terminal_closed_) {
        const ssize_t n = ::write(master_.get(), held_input_.data(), held_input_.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) break;
            held_input_.clear();
            if (errno == EIO) break;  // the terminal has no reader left; the end is near
            return stop(ExitReason::InputFailed);
        }
        held_input_.erase(held_input_.begin(), held_input_.begin() + n);
        if (n > 0) input_watch_.activity();
    }
    if (held_input_.empty()) held_input_.shrink_to_fit();
    update_terminal_events();
    if (was_full && !input_full() && controller_) controller_->session_input_room();
}

bool Session::resize(protocol::WindowSize size) {
    if (!master_) return false;
    if (set_window_size(master_.get(), size) < 0) return false;
    size_ = size;
    tell([this](LogFollower& f) { f.log_resized(*this); });
    return true;
}

namespace {
std::uint64_t monotonic_usec() {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000 + static_cast<std::uint64_t>(t.tv_nsec) / 1000;
}
}  // namespace

std::uint64_t Session::signal_wait_usec() const {
    const std::uint64_t now = monotonic_usec();
    return signal_ready_usec_ > now ? signal_ready_usec_ - now : 0;
}

int Session::signal(const protocol::SignalRequest& request, pid_t& group) {
    if (!processes_) return -ESRCH;
    const std::uint64_t began = monotonic_usec();
    int e = 0;
    if (request.target != protocol::SignalTarget::Foreground) {
        e = processes_->signal_all(request.signal);
    } else {
        // Not TIOCSIG: the pty driver takes only SIGINT, SIGQUIT and SIGTSTP from it. The
        // group is the terminal's, but only its processes in this session that the agent
        // could signal are signalled.
        group = master_ ? ::tcgetpgrp(master_.get()) : -1;
        e = processes_->signal_foreground_group(group, request.signal);
    }
    const std::uint64_t ended = monotonic_usec();
    signal_ready_usec_ = ended + kSignalPacing * (ended - began);
    return e;
}

// ---- Output ------------------------------------------------------------------------------

void Session::on_terminal(std::uint32_t revents) {
    if ((revents & EPOLLOUT) && stage_ == Stage::Running) write_held_input();
    if (revents & (EPOLLHUP | EPOLLERR)) return read_terminal(ReadUntil::End);
    if (revents & EPOLLIN) read_terminal(ReadUntil::Drained);
}

bool Session::paused_for_controller() const {
    if (detached_ || !controller_) return false;
    return log_->end() - controller_->cursor() >= context_.config->limits.output_buffer_bytes;
}

// Why a terminal is read only as far as its line discipline holds bytes (FIONREAD) under a
// flood, not until EAGAIN: a read that finds the line discipline empty waits, in the kernel,
// for the tty's kworker to move what the program wrote (flush_work in n_tty_read), and so
// does a poll of an empty terminal. One thread relays every session: with many terminals
// flooding, every session's last read would stall the loop for a kworker's turn on the CPU,
// one session after another, and the keystrokes of the session a person types into would
// wait behind them all. So the terminal's source is edge-triggered (no poll of an empty
// terminal between events), and each event reads what is there: whatever the kworker moves
// next wakes the source again. A terminal that is the only bulk one delays nobody by waiting,
// and reads on until EAGAIN as before: fewer wake-ups and larger frames for one busy session.
void Session::read_terminal(ReadUntil until) {
    if (!started_ || !master_) return;
    bool grew = false;
    bool drained_only = until == ReadUntil::Drained && g_bulk_terminals > (bulk_ ? 1U : 0U);
    // Only an input event is bounded: to the end, everything must come (nothing else may wake
    // the session again). A budget exceeds the line discipline's 4 KiB, so what was there
    // when the event came is read, and whatever came since has woken the source again.
    const std::size_t full_budget = until == ReadUntil::End ? SIZE_MAX
                                    : drained_only          ? kReadBudgetPerDispatch
                                                            : kWaitingReadBudgetPerDispatch;
    std::size_t budget = full_budget;
    std::size_t read_bytes = 0;
    int hangups = 0;  // reads in a row that said EIO
    while (!terminal_closed_ && !paused_for_controller()) {
        if (budget == 0) break;  // more may be waiting: the source has been woken again
        std::size_t want = std::min<std::size_t>(budget, protocol::kMaxIoPayloadSize);
        if (drained_only) {
            int available = 0;
            if (::ioctl(master_.get(), FIONREAD, &available) < 0) available = 1;  // then read as before
            if (available <= 0) break;
            want = std::min(want, static_cast<std::size_t>(available));
        }
        const ssize_t n = log_->read_from(master_.get(), want);
        if (n > 0) {
            grew = true;
            hangups = 0;
            read_bytes += static_cast<std::size_t>(n);
            budget -= std::min(budget, static_cast<std::size_t>(n));
            // Clients and the screen read the log at their cursors; only who must keep every
            // byte, before the ring can overwrite it, is handed each read.
            const auto view = log_->view(log_->end() - n, n);
            for (LogFollower* follower : byte_followers())
                if (follower) follower->log_read(view.first, view.second);
            continue;
        }
        if (n == -EINTR) continue;
        if (n == -EAGAIN) break;
        if (n < 0 && n != -EIO && !ending()) {
            terminal_closed_ = true;
            if (grew) notify_changed();
            return stop(ExitReason::OutputFailed);
        }
        // EIO (or 0): every holder of the terminal's peer has closed it, and the line
        // discipline is empty. Not always all the output yet: a read waits for the tty's
        // worker to move what the program wrote (flush_work), but a worker that found the line
        // discipline full, and then emptied by this very read, queues itself again, after
        // the wait, with the rest (n_tty_receive_buf_common). Taken for the end, that lost the
        // last KiB of about one flood in a few hundred. Another read waits for that worker;
        // what it brings is read to the end, since no new event may come for it.
        if (++hangups < kHangupReads) {
            drained_only = false;
            budget = SIZE_MAX;
            continue;
        }
        terminal_closed_ = true;  // all output is in
    }
    if (until == ReadUntil::Drained) set_bulk(read_bytes >= kBulkBytesPerDispatch);
    update_terminal_events();
    if (grew) {
        input_watch_.activity();
        if (idle_timeout_) last_activity_usec_ = now_usec(context_.event);
        notify_changed();
    }
    if (terminal_closed_) maybe_finish();
}

void Session::set_bulk(bool bulk) {
    if (bulk == bulk_) return;
    bulk_ = bulk;
    bulk ? ++g_bulk_terminals : --g_bulk_terminals;
    // A source whose priority cannot change keeps the old one: a matter of latency only.
    if (terminal_source_)
        sd_event_source_set_priority(terminal_source_.get(), bulk ? kBulkPriority : kInteractivePriority);
}

void Session::update_terminal_events() {
    if (!terminal_source_) return;
    std::uint32_t events = 0;
    if (started_ && !terminal_closed_ && !paused_for_controller()) events |= EPOLLIN;
    if (!held_input_.empty() && stage_ == Stage::Running && !terminal_closed_) events |= EPOLLOUT;
    if (events != 0) events |= EPOLLET;  // see read_terminal
    // sd-event re-arms an edge-triggered source at every call (EPOLL_CTL_MOD), and the
    // kernel then polls the terminal, which waits for the tty's kworker when it is empty:
    // only a change of the events is worth that.
    if (events == terminal_events_) return;
    terminal_events_ = events;
    if (const int r = set_io_events(terminal_source_, events); r < 0) {
        // A terminal the loop cannot watch is a terminal the session has lost.
        log_error_errno(r, "cannot watch the terminal", {{"UNIT", unit_}});
        terminal_closed_ = true;
        terminal_source_.reset();
        stop(ExitReason::OutputFailed);
    }
}

// ---- End ---------------------------------------------------------------------------------

namespace {

const char* to_string(Session::Stage stage) {
    switch (stage) {
        case Session::Stage::Starting: return "starting";
        case Session::Stage::Running: return "running";
        case Session::Stage::Draining: return "draining";
        case Session::Stage::Stopping: return "stopping";
        case Session::Stage::Closing: return "closing";
        case Session::Stage::Ended: return "ended";
    }
    return "?";
}

// The transitions of the diagram in session.h, and no others.
bool may_follow(Session::Stage from, Session::Stage to) {
    using S = Session::Stage;
    switch (to) {
        case S::Starting: return false;
        case S::Running: return from == S::Starting;
        case S::Draining: return from == S::Starting || from == S::Running;
        case S::Stopping: return from == S::Starting || from == S::Running || from == S::Draining;
        case S::Closing: return from != S::Closing && from != S::Ended;
        case S::Ended: return from != S::Ended;
    }
    return false;
}

}  // namespace

Session::State Session::state() const {
    switch (stage_) {
        case Stage::Starting: return State::Starting;
        case Stage::Running: return State::Running;
        case Stage::Draining:
        case Stage::Stopping:
        case Stage::Closing: return State::Ending;
        case Stage::Ended: return State::Ended;
    }
    return State::Ended;
}

bool Session::drained() const {
    // A session that never started has no output to wait for.
    return terminal_closed_ || drain_expired_ || !master_ || !started_;
}

void Session::enter(Stage next) {
    if (!may_follow(stage_, next)) {
        // A bug, not a client's doing: say so, and keep the session where it is.
        log_error("session stage change refused", {{"UNIT", unit_}, {"FROM", to_string(stage_)}, {"TO", to_string(next)}});
        return;
    }
    log_debug("session stage", {{"UNIT", unit_}, {"FROM", to_string(stage_)}, {"TO", to_string(next)}});
    stage_ = next;
    switch (next) {
        case Stage::Starting:
        case Stage::Running: return;
        case Stage::Draining:
            start_drain_timer();
            read_terminal();
            return maybe_finish();
        case Stage::Stopping: return stop_backend();
        case Stage::Closing:
            if (!drain_timer_) start_drain_timer();
            read_terminal();
            return maybe_finish();
        case Stage::Ended: return;  // finish() does the rest, with the final status
    }
}

void Session::on_exited(protocol::ExitStatus status) {
    exited_ = true;
    exit_status_ = std::move(status);
    keep_final_usage();
    // The main process ended by the OOM killer (memory_max): systemd says so as the unit's
    // result; the direct backend's cgroup counts the kill.
    const bool killed = exit_status_.kind == protocol::ExitStatus::Kind::Signaled && exit_status_.signal == SIGKILL;
    if (exit_status_.unit_result == "oom-kill" ||
        (killed && final_usage_ && final_usage_->oom_kills.value_or(0) > 0))
        exit_status_.reason = ExitReason::OomKill;
    log_info("session command exited", {{"UNIT", unit_}, {"EXIT", std::to_string(exit_status_.shell_status())}});
    if (!ending()) {
        reason_ = exit_status_.reason;
        return enter(Stage::Draining);
    }
    maybe_finish();
}

void Session::stop(ExitReason reason) {
    if (stage_ == Stage::Ended) return;
    if (stage_ == Stage::Starting && !start_failed_ && reason == ExitReason::Stopped) {
        // STARTED precedes EXIT: a STOP that overtakes the start waits for it.
        stop_after_start_ = true;
        return;
    }
    if (stage_ >= Stage::Stopping) return maybe_finish();  // already on its way out
    if (!ending()) reason_ = reason;
    enter(processes_ ? Stage::Stopping : Stage::Closing);
}

void Session::keep_final_usage() {
    if (!processes_) return;
    if (auto now = processes_->usage()) final_usage_ = std::move(now);
}

void Session::stop_backend() {
    keep_final_usage();
    const auto deadline = backends::Clock::now() +
                          std::chrono::duration_cast<backends::Clock::duration>(context_.config->timeouts.cleanup);
    processes_->stop(deadline, guarded("session stopped", [this](bool ok, std::string why) { on_stopped(ok, why); }));
}

void Session::on_stopped(bool ok, const std::string& why) {
    release_slot();
    if (ok) {
        log_info("session cleaned up", {{"UNIT", unit_}, {"REASON", std::string(protocol::to_string(reason_))}});
    } else {
        // Its processes outlived the deadline: the kernel could not end them yet (blocked in a
        // FUSE request its server never answers, in state D). The session ends for its clients
        // like any other; what is left of it (the record and cgroup, or the unit) is the next
        // start's cleanup_orphans() to retry (docs/security.md, "An unkillable session
        // process"), and the killed processes end by themselves once their request is answered.
        ++context_.admission->counters().quarantined;
        log_error("session quarantined: its processes outlived the cleanup deadline",
                  {{"UNIT", unit_}, {"ERROR", why}});
    }
    enter(Stage::Closing);
}

void Session::start_drain_timer() {
    const int r = add_timer(context_.event, drain_timer_, usec(context_.config->timeouts.drain), guarded("drain timer", [this] {
        drain_expired_ = true;
        maybe_finish();
    }));
    if (r < 0) drain_expired_ = true;  // no timer to wait for: do not wait
    else describe_source(drain_timer_, "drain " + id_);
}

void Session::maybe_finish() {
    if (!drained()) return;
    if (stage_ == Stage::Draining) {
        // The command ended on its own and its output is in: clean up what is left.
        if (!terminal_closed_ && reason_ == ExitReason::Exited) reason_ = ExitReason::DrainTimeout;
        return enter(processes_ ? Stage::Stopping : Stage::Closing);
    }
    if (stage_ != Stage::Closing) return;
    protocol::ExitStatus status = exited_ ? exit_status_ : protocol::ExitStatus{};
    status.reason = reason_;
    finish(status);
}

void Session::finish(protocol::ExitStatus status) {
    enter(Stage::Ended);
    ended_usec_ = now_usec(context_.event);
    final_status_ = status;
    set_bulk(false);
    terminal_source_.reset();
    drain_timer_.reset();
    reattach_timer_.reset();
    runtime_timer_.reset();
    idle_timer_.reset();
    input_watch_.set_terminal(-1);
    master_.reset();
    recorder_.reset();
    held_input_.clear();
    unstore_for_handover();
    release_slot();
    if (!start_failed_) context_.admission->count_ended(protocol::to_string(status.reason), bytes_in_, log_->end());
    if (!start_failed_ && context_.audit) {
        AuditRecord r;
        r.kind = AuditKind::End;
        r.session = id_;
        r.exit_status = status.shell_status();
        if (status.kind == protocol::ExitStatus::Kind::Signaled) r.signal = status.signal;
        r.reason = std::string(protocol::to_string(status.reason));
        r.profile = profile_name_;
        context_.audit->record(std::move(r));
    }
    if (!start_failed_)
        log_info("session ended", {{"UNIT", unit_}, {"REASON", std::string(protocol::to_string(status.reason))},
                                   {"EXIT", std::to_string(status.shell_status())},
                                   {"DURATION_S", std::to_string(std::time(nullptr) - created_)}});
    notify_changed();
    owner_.session_ended(*this);
}

void Session::release_slot() {
    if (!holds_slot_) return;
    holds_slot_ = false;
    context_.admission->release_session();
}

}  // namespace ptyvisor::server

// ---- Handover (server/session_handover.h) --------------------------------------------------

namespace ptyvisor::server {

bool Session::can_hand_over() const {
    return stage_ == Stage::Running && started_ && master_ && log_ && processes_;
}

HandoverRecord Session::handover_record() const {
    HandoverRecord r;
    r.id = id_;
    r.unit = unit_;
    r.argv = argv_;
    r.cwd = cwd_;
    r.created = created_;
    r.starter_pid = starter_pid_;
    r.main_pid = main_pid_;
    r.detached = detached_;
    r.size = size_;
    r.bytes_in = bytes_in_;
    return r;
}

bool Session::adopt(const HandoverRecord& record, UniqueFd master, std::unique_ptr<OutputLog> log, std::string& why) {
    backends::SessionEvents events;
    events.on_exited = guarded("session exited", [this](protocol::ExitStatus s) { on_exited(std::move(s)); });
    const backends::Backend::Adoption adoption{unit_, record.main_pid, context_.agent_uid, record.argv.front()};
    processes_ = context_.backend->adopt(adoption, std::move(events), why);
    if (!processes_) return false;
    argv_ = record.argv;
    cwd_ = record.cwd;
    created_ = record.created;
    starter_pid_ = record.starter_pid;
    size_ = record.size;
    bytes_in_ = record.bytes_in;
    main_pid_ = record.main_pid;
    log_ = std::move(log);
    master_ = std::move(master);
    started_ = true;
    enter(Stage::Running);
    holds_slot_ = context_.admission->reserve_session();
    if (!holds_slot_) log_warning("adopted session exceeds max_sessions", {{"UNIT", unit_}});
    if (const int r = add_io(context_.event, terminal_source_, master_.get(), 0,
                             guarded("terminal", [this](std::uint32_t revents) { on_terminal(revents); }));
        r < 0) {
        log_error_errno(r, "cannot watch an adopted terminal", {{"UNIT", unit_}});
        stop(ExitReason::OutputFailed);
        return true;  // it is ours now, and ending
    }
    describe_source(terminal_source_, "terminal " + id_);
    if (!detached_) {
        // Its client lost its connection with the old run: it has this long to come back.
        add_timer(context_.event, reattach_timer_, usec(context_.config->timeouts.reattach),
                  guarded("reattach timer", [this] {
                      if (controller_) return;
                      log_info("session's client did not come back", {{"UNIT", unit_}});
                      stop(ExitReason::Disconnected);
                  }));
    }
    stored_ = context_.fd_store;  // it came from the store, where its descriptors still are
    tell([this](LogFollower& f) { f.log_opened(*this); });  // the worker rebuilds its screen from the log
    update_terminal_events();
    return true;
}

void Session::store_for_handover(bool replace) {
    if (!context_.fd_store || !master_ || !log_) return;
    UniqueFd meta;
    if (const int r = make_sealed_memfd("ptyvisor-meta", encode_handover(handover_record()), meta); r < 0) {
        log_error_errno(r, "cannot keep the session's metadata; it will not survive a restart", {{"UNIT", unit_}});
        return;
    }
    if (replace) {
        fd_store_remove(handover_name("meta", id_));
    } else {
        fd_store_add(handover_name("pty", id_), master_.get());
        fd_store_add(handover_name("log", id_), log_->fd());
    }
    fd_store_add(handover_name("meta", id_), meta.get());
    stored_ = true;
}

void Session::unstore_for_handover() {
    if (!stored_) return;
    stored_ = false;
    for (const char* kind : {"pty", "log", "meta"}) fd_store_remove(handover_name(kind, id_));
}

std::optional<backends::SessionUsage> Session::usage() const {
    if (!processes_ || stage_ == Stage::Ended) return final_usage_;
    const std::uint64_t now = now_usec(context_.event);
    if (cached_usage_ && now - cached_usage_usec_ < 1000000) return cached_usage_;
    cached_usage_ = processes_->usage();
    cached_usage_usec_ = now;
    return cached_usage_ ? cached_usage_ : final_usage_;
}

}  // namespace ptyvisor::server
