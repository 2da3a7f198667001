// InputWatch: whether a session's program waits for input on its terminal (docs/protocol.md,
// 11.5), learned from the kernel (input_probe.h) only while someone asks.
//
// The kernel has no event for "a reader blocked on a tty", so the watch probes /proc, and only
// while a client wants to know (want()/unwant(): a WAIT for input, an EXEC, a WATCH): after
// each pause in the session's activity (output read or input written) of kFirstDelayUsec, then
// at doubling intervals up to kMaxDelayUsec while nothing happens. Once the program is seen
// waiting the timer stops: a blocked reader stays blocked until input or output comes, and
// either is activity. With no one asking, no timer runs at all; LIST and COMMANDS probe once,
// on demand (probe_now), and a probe_now within kFreshUsec of the last probe, with no activity
// since, answers from that probe: however often clients LIST, a session costs at most one
// probe per kFreshUsec.
//
// Invariants: waiting() is false after any activity until a probe says otherwise; waits()
// counts the distinct waits seen (a watcher sends one event per wait).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "common/event.h"
#include "server/input_probe.h"

namespace ptyvisor::server {

class InputWatch {
  public:
    static constexpr std::uint64_t kFirstDelayUsec = 20'000;
    static constexpr std::uint64_t kMaxDelayUsec = 1'000'000;
    static constexpr std::uint64_t kFreshUsec = 50'000;

    // `changed` runs (from the loop, never inside a call to this class) when waiting() becomes
    // true. `log_end`: the session's output log's end now.
    InputWatch(sd_event* event, std::function<void()> changed, std::function<std::uint64_t()> log_end)
        : event_(event), changed_(std::move(changed)), log_end_(std::move(log_end)) {}
    InputWatch(const InputWatch&) = delete;
    InputWatch& operator=(const InputWatch&) = delete;

    // The terminal to watch (its master); -1 when the session has none (ended).
    void set_terminal(int master_fd);

    void want();
    void unwant();
    // Output was read or input written: the program is not (or no longer) waiting.
    void activity();
    // Probes once now (LIST, COMMANDS), and returns waiting().
    bool probe_now();

    [[nodiscard]] bool waiting() const { return waiting_; }
    // Unix milliseconds of the last activity before the wait was seen; nullopt when not waiting.
    [[nodiscard]] std::optional<std::int64_t> since_ms() const {
        return waiting_ ? std::optional<std::int64_t>(last_activity_ms_) : std::nullopt;
    }
    [[nodiscard]] std::uint64_t waits() const { return waits_; }
    // The log's end when the wait was seen: output before it was written before the wait.
    [[nodiscard]] std::uint64_t wait_log_end() const { return wait_log_end_; }
    [[nodiscard]] std::uint64_t probes() const { return probes_; }  // for tests and STATUS

  private:
    void arm(std::uint64_t delay_usec);
    void on_timer();
    bool probe();

    sd_event* event_;
    std::function<void()> changed_;
    std::function<std::uint64_t()> log_end_;
    std::uint64_t wait_log_end_ = 0;
    int master_ = -1;
    TerminalIdentity terminal_;
    int wanted_ = 0;
    bool waiting_ = false;
    std::int64_t last_activity_ms_ = 0;
    std::uint64_t delay_usec_ = kFirstDelayUsec;
    std::uint64_t waits_ = 0, probes_ = 0;
    std::uint64_t probed_usec_ = 0;  // the loop's clock at the last probe; 0: none since activity
    EventSource timer_, notify_;
};

}  // namespace ptyvisor::server
