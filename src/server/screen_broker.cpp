#include "server/screen_broker.h"

#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "common/log.h"
#include "protocol/fd_passing.h"
#include "screen/worker_protocol.h"
#include "server/screen_identity.h"
#include "server/server.h"
#include "server/session.h"

extern char** environ;

namespace ptyvisor::server {

using screen::MessageType;

namespace {

constexpr int kWorkerSocket = 3;  // the worker's end, in the worker
constexpr std::uint64_t kStableUsec = 30'000'000;  // a worker this old resets the backoff

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Each reads one answer at `s[i]`, advancing i past it; false if it is not one.
bool read_csi_answer(std::string_view s, std::size_t& i) {
    if (s.substr(i, 2) != "\x1b[") return false;
    std::size_t j = i + 2;
    char leader = 0;
    if (j < s.size() && (s[j] == '?' || s[j] == '>')) leader = s[j++];
    const std::size_t params = j;
    while (j < s.size() && (is_digit(s[j]) || s[j] == ';') && j - params < 64) ++j;
    if (j >= s.size()) return false;
    bool dollar = false;
    if (s[j] == '$') dollar = true, ++j;
    if (j >= s.size()) return false;
    const char final = s[j];
    const bool ok = (!dollar && final == 'c' && leader != 0) ||          // DA1, DA2
                    (!dollar && final == 'n' && leader == 0) ||          // DSR
                    (!dollar && final == 'R' && leader != '>') ||        // CPR, DECXCPR
                    (dollar && final == 'y' && leader != '>');           // DECRPM
    if (!ok || j == params) return false;  // every answer has parameters
    i = j + 1;
    return true;
}

bool read_dcs_answer(std::string_view s, std::size_t& i) {  // DECRQSS: DCS [01] $ r ... ST
    if (s.substr(i, 2) != "\x1bP" || s.size() < i + 5 || (s[i + 2] != '0' && s[i + 2] != '1') ||
        s.substr(i + 3, 2) != "$r")
        return false;
    std::size_t j = i + 5;
    while (j < s.size() && s[j] >= 0x20 && s[j] < 0x7f && j - i < 80) ++j;
    if (s.substr(j, 2) != "\x1b\\") return false;
    i = j + 2;
    return true;
}

bool read_osc_answer(std::string_view s, std::size_t& i) {  // OSC 4;N / 10 / 11 / 12 ; rgb:h/h/h ST
    if (s.substr(i, 2) != "\x1b]") return false;
    std::size_t j = i + 2;
    const auto number = [&](std::size_t max_digits) {
        const std::size_t from = j;
        while (j < s.size() && is_digit(s[j]) && j - from < max_digits) ++j;
        return j > from;
    };
    const std::size_t code = j;
    if (!number(3)) return false;
    const std::string_view which = s.substr(code, j - code);
    if (which == "4") {
        if (j >= s.size() || s[j++] != ';' || !number(3)) return false;
    } else if (which != "10" && which != "11" && which != "12") {
        return false;
    }
    if (s.substr(j, 5) != ";rgb:") return false;
    j += 5;
    for (int part = 0; part < 3; ++part) {
        const std::size_t from = j;
        while (j < s.size() && is_hex(s[j]) && j - from < 4) ++j;
        if (j == from) return false;
        if (part < 2 && (j >= s.size() || s[j++] != '/')) return false;
    }
    if (s.substr(j, 2) == "\x1b\\") return i = j + 2, true;
    if (j < s.size() && s[j] == '\a') return i = j + 1, true;
    return false;
}

std::string helper_path() {
    // Beside the daemon first (a build tree), then where an install under the daemon's own
    // prefix puts it (PREFIX/sbin/ptyvisord, PREFIX/libexec/ptyvisor/ptyvisor-screen: the
    // package installs under /usr whatever prefix the build was configured with), then the
    // libexec directory of the build's prefix.
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const auto dir = self.parent_path();
        for (const auto& candidate : {dir / "ptyvisor-screen", dir.parent_path() / "libexec/ptyvisor/ptyvisor-screen"})
            if (std::filesystem::exists(candidate, ec)) return candidate;
    }
    return PTYVISOR_LIBEXECDIR "/ptyvisor/ptyvisor-screen";
}

}  // namespace

bool is_terminal_answer(std::string_view s) {
    if (s.empty()) return false;
    std::size_t i = 0;
    while (i < s.size())
        if (!read_csi_answer(s, i) && !read_dcs_answer(s, i) && !read_osc_answer(s, i)) return false;
    return true;
}

ScreenBroker::~ScreenBroker() {
    socket_source_.reset();
    pidfd_source_.reset();
    if (pidfd_) ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);  // SIGKILLed: gone at once
}

// ---- The worker process ------------------------------------------------------------------

void ScreenBroker::start() {
    if (!server_.config().screen.enabled) return;
    std::string why;
    if (!spawn(why)) {
        log_error("cannot start the screen worker", {{"ERROR", why}});
        schedule_restart();
        return;
    }
    for (auto& [session, t] : tracked_) open_in_worker(t);
}

bool ScreenBroker::spawn(std::string& why) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) < 0)
        return why = std::string("socketpair: ") + std::strerror(errno), false;
    UniqueFd ours(pair[0]), theirs(pair[1]);
    // The worker's end is blocking: it waits in recvmsg for work.
    ::fcntl(theirs.get(), F_SETFL, 0);
    if (theirs.get() == kWorkerSocket) theirs.reset(::fcntl(pair[1], F_DUPFD_CLOEXEC, 10));
    const std::string path = helper_path();
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&actions, theirs.get(), kWorkerSocket);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    // An account the administrator chose, or a uid of the worker's own (screen_identity.h),
    // picked once: /proc is read then, not at every restart.
    const std::string& account = server_.config().screen.user;
    if (account.empty() && !worker_uid_) {
        uid_t uid = 0;
        if (!pick_screen_uid(system_uid_probe(), uid, why)) return false;
        worker_uid_ = uid;
        log_info("the screen worker runs as a uid of its own", {{"WORKER_UID", std::to_string(uid)}});
    }
    const std::string uid_text = worker_uid_ ? std::to_string(*worker_uid_) : std::string();
    const char* argv[] = {path.c_str(), account.empty() ? "--uid" : "--user",
                          account.empty() ? uid_text.c_str() : account.c_str(), nullptr};
    pid_t pid = 0;
    const int e = ::posix_spawn(&pid, path.c_str(), &actions, &attr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (e != 0) return why = path + ": " + std::strerror(e), false;
    pid_ = pid;
    pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    socket_ = std::move(ours);
    ++starts_;
    started_usec_ = now_usec(server_.event());
    int r = add_io(server_.event(), socket_source_, socket_.get(), EPOLLIN,
                   [this](std::uint32_t revents) { on_socket(revents); });
    if (r >= 0 && pidfd_)
        r = add_io(server_.event(), pidfd_source_, pidfd_.get(), EPOLLIN, [this](std::uint32_t) { on_worker_exit(); });
    if (r < 0 || !pidfd_) {
        kill_worker("cannot watch it");
        return why = "cannot watch the worker", false;
    }
    log_info("screen worker started", {{"WORKER_PID", std::to_string(pid)}});
    return true;
}

void ScreenBroker::kill_worker(const char* why, bool blame) {
    if (!pid_) return;
    log_warning("killing the screen worker", {{"WORKER_PID", std::to_string(pid_)}, {"REASON", why}});
    if (!pidfd_) ::kill(pid_, SIGKILL);
    worker_gone(blame);
}

void ScreenBroker::on_worker_exit() {
    log_warning("the screen worker exited", {{"WORKER_PID", std::to_string(pid_)}});
    worker_gone(true);
}

// The worker crashed or ran out of time while on this session's output (the oldest work it
// had not finished: it works in order).
void ScreenBroker::strike(std::uint32_t number) {
    Tracked* t = find(number);
    if (!t) return;
    Session& session = *t->session;
    t->unanswered_cpu_usec = 0;  // the next attempt has a whole timeout of its own
    if (++t->strikes < kMaxStrikes) {
        log_warning("the screen worker failed on a session's output", {{"UNIT", session.unit()}});
        return;
    }
    log_warning("turning off the screen of a session whose output the screen worker cannot get through",
                {{"UNIT", session.unit()}, {"STRIKES", std::to_string(t->strikes)}});
    tracked_.erase(&session);
    screenless_.insert(&session);
}

std::uint64_t ScreenBroker::reply_timeout_usec() const {
    return static_cast<std::uint64_t>(server_.config().screen.reply_timeout.count() * 1e6);
}

void ScreenBroker::worker_gone(bool blame) {
    // Killed whatever brought us here: a worker that only closed its socket must not be
    // waited for.
    if (pidfd_) ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    socket_source_.reset();
    pidfd_source_.reset();
    socket_.reset();
    deadline_timer_.reset();
    outgoing_.clear();
    backlog_bytes_ = backlog_fds_ = 0;
    incoming_.clear();
    owed_ = 0;
    if (blame && !work_.empty()) strike(work_.front().number);
    work_.clear();
    if (pid_ > 0) {
        // Killed or exited: reaped now if it is gone, else by the next start's check. A
        // SIGKILLed process is gone within the scheduler's next tick.
        siginfo_t info{};
        if (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED) < 0 && errno == EINVAL)
            ::waitpid(pid_, nullptr, 0);
    }
    pidfd_.reset();
    pid_ = 0;
    for (auto& [session, t] : tracked_) t.advance_in_flight = false;
    gone_advances_.clear();
    gone_tickets_.clear();
    fail_pending("the screen worker stopped; try again");
    const auto lived = now_usec(server_.event()) - started_usec_;
    backoff_usec_ = lived >= kStableUsec ? kFirstBackoffUsec : std::min(backoff_usec_ * 2, kMaxBackoffUsec);
    schedule_restart();
}

void ScreenBroker::schedule_restart() {
    if (server_.shutting_down()) return;
    const int r = rearm_timer(server_.event(), restart_timer_, backoff_usec_, [this] {
        restart_timer_.reset();
        if (!pid_) start();
    });
    if (r < 0) log_error_errno(r, "cannot arm the screen worker's restart");
}

// ---- To the worker -----------------------------------------------------------------------

void ScreenBroker::queue(std::vector<std::uint8_t> bytes, UniqueFd fd, std::uint32_t resize_of,
                         std::uint64_t resize_at) {
    if (!socket_) return;
    backlog_bytes_ += bytes.size();
    if (fd) ++backlog_fds_;
    outgoing_.push_back({std::move(bytes), std::move(fd), 0, resize_of, resize_at});
    flush();
    if (backlog_bytes_ > kMaxBacklogBytes || backlog_fds_ > kMaxBacklogFds) kill_worker("it is too far behind");
}

void ScreenBroker::flush() {
    while (socket_ && !outgoing_.empty()) {
        auto& m = outgoing_.front();
        const auto rest = std::span(m.bytes).subspan(m.sent);
        const long n = protocol::send_once(socket_.get(), rest, m.sent == 0 ? m.fd.get() : -1, MSG_DONTWAIT);
        if (n == -EINTR) continue;
        if (n == -EAGAIN) break;
        if (n <= 0) return kill_worker("cannot write to it");
        m.sent += static_cast<std::size_t>(n);
        backlog_bytes_ -= static_cast<std::size_t>(n);
        if (m.fd) --backlog_fds_;
        m.fd.reset();
        if (m.sent == m.bytes.size()) outgoing_.pop_front();
    }
    if (socket_source_) set_io_events(socket_source_, EPOLLIN | (outgoing_.empty() ? 0u : std::uint32_t{EPOLLOUT}));
}

void ScreenBroker::open_in_worker(Tracked& t) {
    if (!socket_) return;
    const Session& s = *t.session;
    const OutputLog& log = s.log();
    // Read-only: a new open file description of the memfd, which the worker can map only
    // PROT_READ. It cannot write the log, nor grow or shrink it (sealed).
    UniqueFd readonly(::open(("/proc/self/fd/" + std::to_string(log.fd())).c_str(), O_RDONLY | O_CLOEXEC));
    if (!readonly) {
        log_error_errno(-errno, "cannot reopen a log for the screen worker", {{"UNIT", s.unit()}});
        return;
    }
    t.notified_end = log.end();
    t.advance_in_flight = true;  // the worker acknowledges the replay with Advanced
    work_.push_back({t.number, true});
    owe_reply();
    queue(screen::Writer(MessageType::Open)
              .put(t.number)
              .put(std::uint64_t{log.capacity()})
              .put(log.start())
              .put(log.end())
              .put(s.size().cols)
              .put(s.size().rows)
              .put(kScrollbackLines)
              .finish(),
          std::move(readonly));
}

void ScreenBroker::send_advance(Tracked& t, Batch batch) {
    if (!socket_ || t.advance_in_flight) return;
    const std::uint64_t end = t.session->log().end();
    if (end == t.notified_end) return;
    if (batch == Batch::Allowed && t.session->bulk() && end - t.notified_end < kBulkAdvanceBytes) {
        if (!batch_timer_) {
            const int r = rearm_timer(server_.event(), batch_timer_, kBulkAdvanceDelayUsec, [this] { on_batch_timer(); });
            if (r >= 0) {
                sd_event_source_set_priority(batch_timer_.get(), Session::kBulkEventPriority);  // behind keystrokes
                return;
            }
            log_error_errno(r, "cannot arm the screen's batch timer");  // then no batching
        } else {
            return;
        }
    }
    t.notified_end = end;
    t.advance_in_flight = true;
    // Owed before it is queued: queue() may find the worker gone, which forgets what is owed.
    work_.push_back({t.number, true});
    owe_reply();
    queue(screen::Writer(MessageType::Advance).put(t.number).put(end).finish());
}

// The bulk sessions' Advances that waited for more output: whatever has come is due now.
void ScreenBroker::on_batch_timer() {
    batch_timer_.reset();
    for (auto& [session, t] : tracked_) send_advance(t, Batch::Never);
}

// ---- Session hooks -----------------------------------------------------------------------

void ScreenBroker::opened(Session& session) {
    auto& t = tracked_[&session];
    t.session = &session;
    t.number = ++next_number_;
    open_in_worker(t);
}

void ScreenBroker::output(Session& session) {
    const auto it = tracked_.find(&session);
    if (it != tracked_.end()) send_advance(it->second);
}

void ScreenBroker::resized(Session& session) {
    const auto it = tracked_.find(&session);
    if (it == tracked_.end() || !socket_) return;
    const std::uint32_t number = it->second.number;
    const std::uint64_t at = session.log().end();
    auto message = screen::Writer(MessageType::Resize)
                       .put(number)
                       .put(at)
                       .put(session.size().cols)
                       .put(session.size().rows)
                       .finish();
    // The worker would only pass through the size this replaces: no output was written at it.
    if (!outgoing_.empty()) {
        Outgoing& last = outgoing_.back();
        if (last.sent == 0 && last.resize_of == number && last.resize_at == at && last.bytes.size() == message.size()) {
            last.bytes = std::move(message);
            return;
        }
    }
    work_.push_back({number, false});
    queue(std::move(message), {}, number, at);
}

void ScreenBroker::closed(Session& session) {
    screenless_.erase(&session);
    const auto it = tracked_.find(&session);
    if (it == tracked_.end()) return;
    queue(screen::Writer(MessageType::Close).put(it->second.number).finish());
    if (it->second.advance_in_flight && socket_) gone_advances_.insert(it->second.number);
    tracked_.erase(it);
    for (auto p = pending_.begin(); p != pending_.end();) {
        if (p->second.session != &session) {
            ++p;
            continue;
        }
        finish_later(p->first, std::move(p->second.done), false, "the session has gone");
        if (socket_) gone_tickets_.insert(p->first);
        p = pending_.erase(p);
    }
}

// ---- SNAPSHOT ----------------------------------------------------------------------------

std::uint32_t ScreenBroker::snapshot(Session& session, const protocol::SnapshotRequest& request, Done done) {
    const std::uint32_t ticket = ++next_ticket_ ? next_ticket_ : ++next_ticket_;
    if (screenless_.contains(&session)) {
        finish_later(ticket, std::move(done), false,
                     "this session's screen is off: the screen worker failed on its output " +
                         std::to_string(kMaxStrikes) + " times");
        return ticket;
    }
    const auto it = tracked_.find(&session);
    if (!socket_ || it == tracked_.end()) {
        finish_later(ticket, std::move(done), false, "the screen worker is not running; try again");
        return ticket;
    }
    Pending p;
    p.session = &session;
    p.id = session.id();
    // The emulator's size: a side larger than kMaxScreenSide is clamped to it there, and a
    // reply checked against the larger one killed the worker that every session shares.
    p.bounds = {std::min(session.size().cols, protocol::kMaxScreenSide),
                std::min(session.size().rows, protocol::kMaxScreenSide), std::min(request.scrollback, kScrollbackLines),
                request.attributes};
    p.done = std::move(done);
    pending_[ticket] = std::move(p);
    work_.push_back({it->second.number, true});  // owed first, as in send_advance
    owe_reply();
    queue(screen::Writer(MessageType::Snapshot)
              .put(ticket)
              .put(it->second.number)
              .put(session.log().end())
              .put(std::min(request.scrollback, kScrollbackLines))
              .put(std::uint8_t{request.attributes})
              .finish());
    return ticket;
}

void ScreenBroker::cancel(std::uint32_t ticket) {
    if (const auto it = pending_.find(ticket); it != pending_.end()) it->second.done = nullptr;
    for (auto& f : finished_)
        if (f.ticket == ticket) f.done = nullptr;
}

void ScreenBroker::fail_pending(const std::string& why) {
    for (auto& [ticket, p] : pending_) finish_later(ticket, std::move(p.done), false, why);
    pending_.clear();
}

void ScreenBroker::finish_later(std::uint32_t ticket, Done done, bool ok, std::string text) {
    if (!done) return;
    finished_.push_back({ticket, std::move(done), ok, std::move(text)});
    if (!finished_source_) {
        const int r = add_defer(server_.event(), finished_source_, [this] { run_finished(); });
        if (r < 0) log_error_errno(r, "cannot schedule a snapshot's reply");
    }
}

void ScreenBroker::run_finished() {
    finished_source_.reset();
    auto batch = std::move(finished_);
    finished_.clear();
    for (auto& f : batch) {
        if (!f.done) continue;
        try {
            f.done(f.ok, std::move(f.text));
        } catch (const std::exception& e) {
            log_error("a snapshot's reply failed", {{"ERROR", e.what()}});
        }
    }
}

// ---- From the worker ---------------------------------------------------------------------

void ScreenBroker::owe_reply() {
    if (owed_++ > 0 && deadline_timer_) return;
    arm_deadline();
}

void ScreenBroker::paid_reply() {
    if (owed_ > 0) --owed_;
    // The reply ends the oldest work that replies, and so everything sent before it. The
    // worker got through that session's output: its strikes are forgiven (a worker killed
    // from outside is not the session's doing).
    while (!work_.empty() && !work_.front().replies) work_.pop_front();
    if (!work_.empty()) {
        if (Tracked* t = find(work_.front().number)) {
            t->strikes = 0;
            t->unanswered_cpu_usec = 0;
        }
        work_.pop_front();
    }
    if (owed_ == 0) deadline_timer_.reset();
    else arm_deadline();
}

// The reply timeout counts the worker's CPU time, not the clock's: on a loaded machine (the
// worker runs at nice 10) a replay can take long without its output being to blame. A worker
// that has spent the timeout's worth of CPU on one piece of work is killed, and the session
// whose work it was takes a strike; one that is merely waiting for a CPU is given more time,
// up to kStuckFactor timeouts of the clock, and then killed without a strike.
void ScreenBroker::arm_deadline() {
    deadline_cpu_usec_ = worker_cpu_usec();
    deadline_wall_usec_ = now_usec(server_.event());
    rearm_deadline(reply_timeout_usec());
}

void ScreenBroker::rearm_deadline(std::uint64_t usec) {
    const int r = rearm_timer(server_.event(), deadline_timer_, usec, [this] { on_deadline(); });
    if (r < 0) log_error_errno(r, "cannot arm the screen worker's deadline");
}

void ScreenBroker::on_deadline() {
    const std::uint64_t timeout = reply_timeout_usec();
    const std::uint64_t cpu = worker_cpu_usec() - deadline_cpu_usec_;
    const std::uint64_t wall = now_usec(server_.event()) - deadline_wall_usec_;
    // A starved worker is killed without a strike, but what it spent counts: a session whose
    // output needs more CPU than the timeout must not escape for good on a busy machine,
    // where every attempt is cut short by the clock before it uses the timeout's worth.
    Tracked* t = work_.empty() ? nullptr : find(work_.front().number);
    const std::uint64_t spent = cpu + (t ? t->unanswered_cpu_usec : 0);
    if (spent >= timeout) return kill_worker("it spent its reply timeout's worth of CPU on one piece of work", true);
    if (wall >= kStuckFactor * timeout) {
        if (t) t->unanswered_cpu_usec = spent;
        return kill_worker("it did not answer, nor use the CPU, in time");
    }
    rearm_deadline(std::max<std::uint64_t>(timeout - spent, 100'000));
}

std::uint64_t ScreenBroker::worker_cpu_usec() const {
    // The kernel's per-process CPU clock; a worker gone or unreadable counts as having used
    // none (its exit is seen on its pidfd).
    clockid_t clock{};
    timespec ts{};
    if (pid_ <= 0 || ::clock_getcpuclockid(pid_, &clock) != 0 || ::clock_gettime(clock, &ts) != 0) return 0;
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<std::uint64_t>(ts.tv_nsec) / 1000;
}

void ScreenBroker::on_socket(std::uint32_t revents) {
    try {
        if (revents & EPOLLOUT) flush();
        if (!socket_ || !(revents & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
        std::uint8_t buffer[64 * 1024];
        for (int reads = 0; socket_ && reads < 16; ++reads) {
            const ssize_t n = ::recv(socket_.get(), buffer, sizeof buffer, MSG_DONTWAIT);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) break;
            if (n <= 0) return on_worker_exit();
            incoming_.insert(incoming_.end(), buffer, buffer + n);
            const auto used = screen::split_messages(incoming_, screen::kMaxWorkerMessage,
                                                     [this](MessageType type, std::span<const std::uint8_t> body) {
                                                         return handle(static_cast<std::uint8_t>(type), body);
                                                     });
            if (!socket_) return;
            if (!used) return kill_worker("it sent a malformed message");
            incoming_.erase(incoming_.begin(), incoming_.begin() + static_cast<std::ptrdiff_t>(*used));
        }
    } catch (const std::exception& e) {
        log_error("screen worker messages failed", {{"ERROR", e.what()}});
        kill_worker("its messages could not be handled");
    }
}

bool ScreenBroker::handle(std::uint8_t type, std::span<const std::uint8_t> body) {
    switch (static_cast<MessageType>(type)) {
        case MessageType::Advanced: return handle_advanced(body);
        case MessageType::Screen: return handle_screen(body);
        default: return false;
    }
}

ScreenBroker::Tracked* ScreenBroker::find(std::uint32_t number) {
    for (auto& [session, t] : tracked_)
        if (t.number == number) return &t;
    return nullptr;
}

bool ScreenBroker::handle_advanced(std::span<const std::uint8_t> body) {
    screen::Reader r(body);
    std::uint32_t number = 0;
    std::uint64_t offset = 0;
    if (!r.get(number) || !r.get(offset)) return false;
    const std::string_view answers = r.rest();
    if (answers.size() > screen::kMaxAnswerBytes) return false;
    Tracked* t = find(number);
    if (!t) {
        // Closed since: a reply it still owed is expected once; anything else is a lie.
        if (gone_advances_.erase(number) == 0) return false;
        paid_reply();
        return true;
    }
    if (!t->advance_in_flight || offset > t->session->log().end()) return false;
    t->advance_in_flight = false;
    paid_reply();
    Session& session = *t->session;
    if (!answers.empty()) {
        if (!is_terminal_answer(answers))
            log_warning("dropped a screen answer of an unknown form", {{"UNIT", session.unit()}});
        else if (!session.controller_has_terminal())
            session.answer_queries(std::span(reinterpret_cast<const std::uint8_t*>(answers.data()), answers.size()));
    }
    send_advance(*t);
    return true;
}

bool ScreenBroker::handle_screen(std::span<const std::uint8_t> body) {
    screen::Reader r(body);
    std::uint32_t ticket = 0, number = 0;
    if (!r.get(ticket) || !r.get(number)) return false;
    const auto it = pending_.find(ticket);
    if (it == pending_.end()) {
        if (gone_tickets_.erase(ticket) == 0) return false;
        paid_reply();
        return true;
    }
    Pending p = std::move(it->second);
    pending_.erase(it);
    paid_reply();
    auto decoded = protocol::decode_screen(r.rest(), p.bounds);
    if (!decoded) {
        log_warning("the screen worker's snapshot is malformed", {{"ERROR", decoded.error}});
        finish_later(ticket, std::move(p.done), false, "the screen worker failed; try again");
        return false;
    }
    decoded.value->id = p.id;
    finish_later(ticket, std::move(p.done), true, protocol::encode(*decoded.value));
    return true;
}

}  // namespace ptyvisor::server
