// The orders a systemd session relies on, enforced rather than assumed. Neither class here
// touches the bus, so both are tested without one.
//
// Lifecycle, the session's phases:
//
//   Created --watch()--> Watching --send_start()--> Starting --start()--> Running --end()--> Ended
//                                                       \--fail_start()--> StartFailed
//
//   watch():      the unit's PropertiesChanged match is installed.
//   send_start(): StartTransientUnit goes out. Only after watch(): the bus handles one
//                 connection's messages in order, so the match is in force before systemd
//                 can say anything about the unit.
//   start(), fail_start(), end(): on_started, on_start_failed, on_exited.
//
// Each transition is taken only from the phase it leaves; asked for in any other phase it is
// refused (false) and logged as a bug, and the caller does nothing. So on_started,
// on_start_failed and on_exited each follow at most once, and on_exited only after on_started.
//
// StartJob, the start job's JobRemoved matched to StartTransientUnit's reply: JobRemoved may
// overtake the reply that names the job, and is then kept until the reply comes. The job
// finishes once: its result is handed out at most once, whatever else is removed later.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptyvisor::backends::systemd {

class Lifecycle {
public:
    enum class Phase { Created, Watching, Starting, Running, Ended, StartFailed };

    [[nodiscard]] Phase phase() const { return phase_; }
    [[nodiscard]] bool is(Phase p) const { return phase_ == p; }
    // StartTransientUnit has not gone out: no unit exists, nothing about it can arrive.
    [[nodiscard]] bool before_start() const {
        return phase_ == Phase::Created || phase_ == Phase::Watching;
    }
    // Ended or StartFailed: the session will report nothing more.
    [[nodiscard]] bool finished() const {
        return phase_ == Phase::Ended || phase_ == Phase::StartFailed;
    }

    [[nodiscard]] bool watch() { return advance(Phase::Created, Phase::Watching); }
    [[nodiscard]] bool send_start() { return advance(Phase::Watching, Phase::Starting); }
    [[nodiscard]] bool start() { return advance(Phase::Starting, Phase::Running); }
    [[nodiscard]] bool fail_start() { return advance(Phase::Starting, Phase::StartFailed); }
    [[nodiscard]] bool end() { return advance(Phase::Running, Phase::Ended); }

private:
    bool advance(Phase from, Phase to);

    Phase phase_ = Phase::Created;
};

std::string_view to_string(Lifecycle::Phase phase);

class StartJob {
public:
    // JobRemoved(job, result) for our unit: the result when it is our start job's.
  [[nodiscard]] std::optional<std::string> removed(const std::string& job,
                                                   const std::string& result);
  // The reply names the job: the result of a JobRemoved that came before it, if any.
  [[nodiscard]] std::optional<std::string> replied(const std::string& job);
  // The reply is lost (systemd went away with it) while the unit is still activating: the
  // unit's next JobRemoved is ours, whichever job it names.
  void reply_lost();
  [[nodiscard]] bool awaiting_reply() const { return state_ == State::AwaitingReply; }

private:
    enum class State { AwaitingReply, Known, Finished };
    std::optional<std::string> finish(std::string result);

    State state_ = State::AwaitingReply;
    std::string path_;  // once Known; empty: any job of the unit
    std::vector<std::pair<std::string, std::string>> early_;  // job path, result
};

}  // namespace ptyvisor::backends::systemd
