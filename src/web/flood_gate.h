// FloodGate: decides, for one terminal socket, whether the page gets the session's output as
// bytes or, while the session prints faster than a page can afford to draw, as screen states.
// No socket and no clock of its own: the caller passes the time, so that tests drive it.
//
// Invariants:
//   - While streaming, the bytes passed in any interval of length T are at most
//     burst + rate * T (a token bucket): that is what one terminal can cost the page.
//   - Once a chunk does not fit, the gate is in Screen mode and passes nothing; the caller
//     then asks the daemon for a SNAPSHOT at most once per `interval` (snapshot_due).
//   - It leaves Screen mode only on a snapshot whose offset advanced at most `quiet_rate`
//     since the previous one: that snapshot is final, and the stream resumes at its offset.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

namespace ptyvisor::web {

// Outside FloodGate: g++ cannot use a nested class's member initializers in a default argument.
struct FloodLimits {
    std::size_t burst = 64 * 1024;            // bytes passed at once after a quiet spell
    std::size_t rate = 256 * 1024;            // bytes per second passed for ever
    std::chrono::milliseconds interval{250};  // between two snapshots while flooding
    std::size_t quiet_rate = 64 * 1024;       // bytes per second below which a flood is over
};

class FloodGate {
public:
    using Clock = std::chrono::steady_clock;

    using Limits = FloodLimits;

    explicit FloodGate(Limits limits = {}) : limits_(limits), tokens_(static_cast<double>(limits.burst)) {}

    enum class Mode { Streaming, Screen };
    [[nodiscard]] Mode mode() const { return mode_; }

    // `n` bytes of output at `now`: true if they go to the page as bytes. False switches to
    // Screen mode (the first false: entered() becomes true once).
    bool pass(std::size_t n, Clock::time_point now);

    // Screen mode: whether a SNAPSHOT should be asked now (none in flight, interval passed).
    [[nodiscard]] bool snapshot_due(Clock::time_point now) const;
    // When the next one will be due (for a timer); only meaningful in Screen mode.
    [[nodiscard]] Clock::time_point next_snapshot_at() const {
        return last_asked_ ? *last_asked_ + limits_.interval : Clock::time_point{};
    }
    void snapshot_asked(Clock::time_point now);

    // A SNAPSHOT asked at the last snapshot_asked() answered with log offset `offset`. True
    // when it is final: the gate is streaming again, from `offset` on.
    bool snapshot_answered(std::uint64_t offset);
    // It failed: the caller decides (retry, or give_up()).
    void snapshot_failed() { in_flight_ = false; }
    // Back to streaming without a final screen (snapshots are not to be had).
    void give_up(Clock::time_point now);

private:
    void refill(Clock::time_point now);

    Limits limits_;
    Mode mode_ = Mode::Streaming;
    double tokens_;
    std::optional<Clock::time_point> refilled_at_;
    bool in_flight_ = false;
    std::optional<Clock::time_point> last_asked_;  // none yet in this flood
    Clock::time_point asked_{};  // when the snapshot in flight was asked
    std::optional<std::pair<std::uint64_t, Clock::time_point>> previous_;  // last answer
};

}  // namespace ptyvisor::web
