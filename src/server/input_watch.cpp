#include "server/input_watch.h"

#include <algorithm>
#include <chrono>

#include "common/log.h"

namespace ptyvisor::server {
namespace {

std::int64_t unix_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

void InputWatch::set_terminal(int master_fd) {
    master_ = master_fd;
    terminal_ = master_fd >= 0 ? identify_terminal(master_fd) : TerminalIdentity{};
    last_activity_ms_ = unix_ms();
    if (master_ < 0) {
        timer_.reset();
        waiting_ = false;
    } else if (wanted_ > 0) {
        arm(kFirstDelayUsec);
    }
}

void InputWatch::want() {
    if (wanted_++ == 0 && master_ >= 0 && !waiting_) arm(kFirstDelayUsec);
}

void InputWatch::unwant() {
    if (wanted_ > 0 && --wanted_ == 0) timer_.reset();
}

void InputWatch::activity() {
    last_activity_ms_ = unix_ms();
    waiting_ = false;
    probed_usec_ = 0;
    if (wanted_ > 0 && master_ >= 0) arm(kFirstDelayUsec);
}

bool InputWatch::probe_now() {
    const bool fresh = probed_usec_ != 0 && now_usec(event_) - probed_usec_ < kFreshUsec;
    if (master_ >= 0 && !waiting_ && !fresh && probe()) {
        // Watchers learn of it on the next turn, not inside the caller's request.
        timer_.reset();
        notify_.reset();
        if (const int r = add_defer(event_, notify_, [this] { changed_(); }); r < 0)
            log_warning("cannot schedule the input wait's notice", {{"ERRNO", std::to_string(-r)}});
    }
    return waiting_;
}

void InputWatch::arm(std::uint64_t delay_usec) {
    delay_usec_ = delay_usec;
    if (const int r = rearm_timer(event_, timer_, delay_usec, [this] { on_timer(); }); r < 0)
        log_warning("cannot arm the input probe timer", {{"ERRNO", std::to_string(-r)}});
}

void InputWatch::on_timer() {
    if (wanted_ == 0 || master_ < 0) return;
    if (probe()) return changed_();  // waiting: no timer until activity
    arm(std::min(delay_usec_ * 2, kMaxDelayUsec));
}

// One probe; true when it found the program newly waiting.
bool InputWatch::probe() {
    ++probes_;
    probed_usec_ = std::max<std::uint64_t>(now_usec(event_), 1);
    const InputWait answer = probe_input_wait(master_, terminal_);
    if (answer.state != InputWait::State::Waiting || waiting_) return false;
    waiting_ = true;
    wait_log_end_ = log_end_ ? log_end_() : 0;
    ++waits_;
    return true;
}

}  // namespace ptyvisor::server
