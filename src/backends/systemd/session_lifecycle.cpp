#include "backends/systemd/session_lifecycle.h"

#include "common/log.h"

namespace ptyvisor::backends::systemd {

bool Lifecycle::advance(Phase from, Phase to) {
    if (phase_ != from) {
        log_error("systemd session: transition refused (a bug)",
                  {{"PHASE", std::string(to_string(phase_))},
                   {"FROM", std::string(to_string(from))},
                   {"TO", std::string(to_string(to))}});
        return false;
    }
    phase_ = to;
    return true;
}

std::string_view to_string(Lifecycle::Phase phase) {
    switch (phase) {
        case Lifecycle::Phase::Created: return "created";
        case Lifecycle::Phase::Watching: return "watching";
        case Lifecycle::Phase::Starting: return "starting";
        case Lifecycle::Phase::Running: return "running";
        case Lifecycle::Phase::Ended: return "ended";
        case Lifecycle::Phase::StartFailed: return "start-failed";
    }
    return "unknown";
}

std::optional<std::string> StartJob::finish(std::string result) {
    state_ = State::Finished;
    early_.clear();
    return result;
}

std::optional<std::string> StartJob::removed(const std::string& job, const std::string& result) {
    switch (state_) {
        case State::AwaitingReply: early_.emplace_back(job, result); return std::nullopt;
        case State::Known:
            if (path_.empty() || path_ == job) return finish(result);
            return std::nullopt;
        case State::Finished: return std::nullopt;
    }
    return std::nullopt;
}

std::optional<std::string> StartJob::replied(const std::string& job) {
    if (state_ == State::Finished) return std::nullopt;
    state_ = State::Known;
    path_ = job;
    for (auto& [path, result] : early_)
        if (path == job) return finish(std::move(result));
    early_.clear();
    return std::nullopt;
}

void StartJob::reply_lost() {
    if (state_ != State::AwaitingReply) return;
    state_ = State::Known;
    path_.clear();
    early_.clear();
}

}  // namespace ptyvisor::backends::systemd
