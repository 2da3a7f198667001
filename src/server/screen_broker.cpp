#include "server/screen_broker.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "common/log.h"
#include "common/utf8.h"
#include "protocol/fd_passing.h"
#include "screen/worker_protocol.h"
#include "server/config.h"

namespace ptyvisor::server {

using screen::MessageType;

namespace {

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

}  // namespace

bool is_terminal_answer(std::string_view s) {
    if (s.empty()) return false;
    std::size_t i = 0;
    while (i < s.size())
        if (!read_csi_answer(s, i) && !read_dcs_answer(s, i) && !read_osc_answer(s, i)) return false;
    return true;
}

ScreenBroker::Options screen_broker_options(const ScreenSettings& settings) {
    ScreenBroker::Options options;
    options.enabled = settings.enabled;
    options.user = settings.user;
    options.reply_timeout_usec = to_usec(settings.reply_timeout);
    return options;
}

ScreenBroker::ScreenBroker(sd_event* event, Options options, std::function<bool()> shutting_down)
    : event_(event),
      options_(std::move(options)),
      worker_(event, {options_.worker_path, options_.user, options_.reply_timeout_usec},
              {[this](UniqueFd socket) { worker_started(std::move(socket)); },
               [this](bool blame) { worker_gone(blame); },
               [this] {
                   const Tracked* t = work_in_hand();
                   return t ? t->unanswered_cpu_usec : 0;
               },
               [this](std::uint64_t spent_usec) {
                   if (Tracked* t = work_in_hand()) t->unanswered_cpu_usec = spent_usec;
               },
               std::move(shutting_down)}),
      // The bulk sessions' Advances that waited for more output: whatever has come is due now.
      batch_(event, kBulkAdvanceBytes, kBulkAdvanceDelayUsec, [this] {
          for (auto& [session, t] : tracked_) send_advance(t, Batch::Never);
      }) {}

// ---- The worker process ------------------------------------------------------------------

void ScreenBroker::start() {
    if (options_.enabled) worker_.start();
}

void ScreenBroker::worker_started(UniqueFd socket) {
    socket_ = std::move(socket);
    const int r = add_io(event_, socket_source_, socket_.get(), EPOLLIN,
                         [this](std::uint32_t revents) { on_socket(revents); });
    if (r < 0) {
        log_error_errno(r, "cannot watch the screen worker's socket");
        return worker_.kill("cannot watch it");
    }
    for (auto& [session, t] : tracked_) open_in_worker(t);
}

void ScreenBroker::worker_gone(bool blame) {
    socket_source_.reset();
    socket_.reset();
    outgoing_.clear();
    backlog_bytes_ = backlog_fds_ = 0;
    incoming_.clear();
    owed_ = 0;
    if (blame && !work_.empty()) strike(work_.front().number);
    work_.clear();
    for (auto& [session, t] : tracked_) t.advance_in_flight = false;
    gone_advances_.clear();
    gone_tickets_.clear();
    fail_pending("the screen worker stopped; try again");
}

// The session whose output the worker is on: the oldest work it has not finished (it works
// in order).
ScreenBroker::Tracked* ScreenBroker::work_in_hand() { return work_.empty() ? nullptr : find(work_.front().number); }

// The worker crashed or ran out of time while on this session's output.
void ScreenBroker::strike(std::uint32_t number) {
    Tracked* t = find(number);
    if (!t) return;
    ScreenSubject& session = *t->session;
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

// ---- To the worker -----------------------------------------------------------------------

void ScreenBroker::queue(std::vector<std::uint8_t> bytes, UniqueFd fd, std::uint32_t resize_of,
                         std::uint64_t resize_at) {
    if (!socket_) return;
    backlog_bytes_ += bytes.size();
    if (fd) ++backlog_fds_;
    outgoing_.push_back({std::move(bytes), std::move(fd), 0, resize_of, resize_at});
    flush();
    if (backlog_bytes_ > kMaxBacklogBytes || backlog_fds_ > kMaxBacklogFds) worker_.kill("it is too far behind");
}

void ScreenBroker::flush() {
    while (socket_ && !outgoing_.empty()) {
        auto& m = outgoing_.front();
        const auto rest = std::span(m.bytes).subspan(m.sent);
        const long n = protocol::send_once(socket_.get(), rest, m.sent == 0 ? m.fd.get() : -1, MSG_DONTWAIT);
        if (n == -EINTR) continue;
        if (n == -EAGAIN) break;
        if (n <= 0) return worker_.kill("cannot write to it");
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
    const ScreenSubject& s = *t.session;
    const OutputLog& log = s.log();
    // Read-only: a new open file description of the memfd, which the worker can map only
    // PROT_READ. It cannot write the log, nor grow or shrink it (sealed).
    UniqueFd readonly(::open(("/proc/self/fd/" + std::to_string(log.fd())).c_str(), O_RDONLY | O_CLOEXEC));
    if (!readonly) {
        log_error_errno(-errno, "cannot reopen a log for the screen worker", {{"UNIT", s.unit()}});
        return;
    }
    t.notified_end = log.end();
    t.last_mark = 0;  // the replay's marks start over
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
    if (batch == Batch::Allowed && t.session->bulk() && batch_.wait(end - t.notified_end)) return;
    t.notified_end = end;
    t.advance_in_flight = true;
    // Owed before it is queued: queue() may find the worker gone, which forgets what is owed.
    work_.push_back({t.number, true});
    owe_reply();
    queue(screen::Writer(MessageType::Advance).put(t.number).put(end).finish());
}

// ---- Session hooks -----------------------------------------------------------------------

void ScreenBroker::log_opened(ScreenSubject& session) {
    auto& t = tracked_[&session];
    t.session = &session;
    t.number = ++next_number_;
    open_in_worker(t);
}

void ScreenBroker::log_changed(ScreenSubject& session) {
    const auto it = tracked_.find(&session);
    if (it != tracked_.end()) send_advance(it->second);
}

void ScreenBroker::log_resized(ScreenSubject& session) {
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

void ScreenBroker::log_closed(ScreenSubject& session) {
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

std::uint32_t ScreenBroker::snapshot(ScreenSubject& session, const protocol::SnapshotRequest& request, Done done) {
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
        const int r = add_defer(event_, finished_source_, [this] { run_finished(); });
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
    if (owed_++ > 0 && worker_.deadline_armed()) return;
    worker_.arm_deadline();
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
    if (owed_ == 0) worker_.disarm_deadline();
    else worker_.arm_deadline();
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
            if (n <= 0) return worker_.exited();
            incoming_.insert(incoming_.end(), buffer, buffer + n);
            const auto used = screen::split_messages(incoming_, screen::kMaxWorkerMessage,
                                                     [this](MessageType type, std::span<const std::uint8_t> body) {
                                                         return handle(static_cast<std::uint8_t>(type), body);
                                                     });
            if (!socket_) return;
            if (!used) return worker_.kill("it sent a malformed message");
            incoming_.erase(incoming_.begin(), incoming_.begin() + static_cast<std::ptrdiff_t>(*used));
        }
    } catch (const std::exception& e) {
        log_error("screen worker messages failed", {{"ERROR", e.what()}});
        worker_.kill("its messages could not be handled");
    }
}

bool ScreenBroker::handle(std::uint8_t type, std::span<const std::uint8_t> body) {
    switch (static_cast<MessageType>(type)) {
        case MessageType::Advanced: return handle_advanced(body);
        case MessageType::Screen: return handle_screen(body);
        case MessageType::Mark: return handle_mark(body);
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
    ScreenSubject& session = *t->session;
    if (!answers.empty()) {
        if (!is_terminal_answer(answers))
            log_warning("dropped a screen answer of an unknown form", {{"UNIT", session.unit()}});
        else if (!session.controller_has_terminal())
            session.answer_queries(std::span(reinterpret_cast<const std::uint8_t*>(answers.data()), answers.size()));
    }
    send_advance(*t);
    // Last: what the session does with it may reach any connection (an EXEC that answers).
    session.screen_advanced(offset);
    return true;
}

bool ScreenBroker::handle_mark(std::span<const std::uint8_t> body) {
    screen::Reader r(body);
    std::uint32_t number = 0;
    std::uint8_t kind = 0;
    std::uint64_t offset = 0;
    std::int32_t exit_code = 0;
    if (!r.get(number) || !r.get(kind) || !r.get(offset) || !r.get(exit_code)) return false;
    const std::string_view text = r.rest();
    using Kind = ShellMark::Kind;
    if (kind < static_cast<std::uint8_t>(Kind::Prompt) || kind > static_cast<std::uint8_t>(Kind::Cwd)) return false;
    const auto k = static_cast<Kind>(kind);
    if (exit_code != -1 && (k != Kind::CommandEnd || exit_code < 0 || exit_code > 255)) return false;
    if (!text.empty() && k != Kind::OutputStart && k != Kind::Cwd) return false;
    if (text.size() > ShellMark::kMaxText || !utf8::is_valid(text)) return false;
    Tracked* t = find(number);
    // Closed since, its Advanced still owed: the marks before it are expected, and dropped.
    if (!t) return gone_advances_.contains(number);
    if (!t->advance_in_flight || offset > t->notified_end || offset < t->last_mark) return false;
    t->last_mark = offset;
    ShellMark mark;
    mark.kind = k;
    mark.offset = offset;
    if (exit_code != -1) mark.exit_code = exit_code;
    mark.text = text;
    try {
        t->session->shell_mark(mark);
    } catch (const std::exception& e) {  // the session's failure, not the worker's
        log_error("a shell mark could not be recorded", {{"UNIT", t->session->unit()}, {"ERROR", e.what()}});
    }
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
