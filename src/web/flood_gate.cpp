#include "web/flood_gate.h"

#include <algorithm>

namespace ptyvisor::web {

void FloodGate::refill(Clock::time_point now) {
    if (refilled_at_ && now > *refilled_at_) {
        const double seconds = std::chrono::duration<double>(now - *refilled_at_).count();
        tokens_ = std::min(static_cast<double>(limits_.burst), tokens_ + seconds * static_cast<double>(limits_.rate));
    }
    refilled_at_ = std::max(refilled_at_.value_or(now), now);
}

bool FloodGate::pass(std::size_t n, Clock::time_point now) {
    if (mode_ == Mode::Screen) return false;
    refill(now);
    if (static_cast<double>(n) <= tokens_) {
        tokens_ -= static_cast<double>(n);
        return true;
    }
    mode_ = Mode::Screen;
    in_flight_ = false;
    previous_.reset();
    last_asked_.reset();
    return false;
}

bool FloodGate::snapshot_due(Clock::time_point now) const {
    return mode_ == Mode::Screen && !in_flight_ && (!last_asked_ || now >= *last_asked_ + limits_.interval);
}

void FloodGate::snapshot_asked(Clock::time_point now) {
    in_flight_ = true;
    last_asked_ = now;
    asked_ = now;
}

bool FloodGate::snapshot_answered(std::uint64_t offset) {
    in_flight_ = false;
    if (mode_ != Mode::Screen) return false;
    const auto previous = previous_;
    previous_.emplace(offset, asked_);
    // The first screen of a flood is never final: quiet needs two offsets to compare.
    if (!previous) return false;
    const double seconds = std::chrono::duration<double>(asked_ - previous->second).count();
    const auto advanced = offset > previous->first ? offset - previous->first : 0;
    if (static_cast<double>(advanced) > seconds * static_cast<double>(limits_.quiet_rate)) return false;
    mode_ = Mode::Streaming;
    tokens_ = static_cast<double>(limits_.burst);
    refilled_at_ = asked_;
    return true;
}

void FloodGate::give_up(Clock::time_point now) {
    mode_ = Mode::Streaming;
    in_flight_ = false;
    tokens_ = static_cast<double>(limits_.burst);
    refilled_at_ = now;
}

}  // namespace ptyvisor::web
