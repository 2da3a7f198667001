#include "server/command_tracker.h"

#include <algorithm>

namespace ptyvisor::server {

CommandTracker::Change CommandTracker::apply(const ShellMark& mark, std::int64_t now_ms) {
    const bool is_end = mark.kind == ShellMark::Kind::CommandEnd;
    const std::pair<std::uint64_t, bool> at{mark.offset, is_end};
    if (last_mark_ && at <= *last_mark_) return {};  // a replay of what was applied
    last_mark_ = at;
    has_marks_ = true;

    Change change;
    switch (mark.kind) {
        case ShellMark::Kind::Prompt:
            // A command that ended without a D mark (its shell was killed and replaced, or
            // another program printed a prompt): it ended here, status unknown.
            if (current_) {
                end_current(mark.offset, std::nullopt, now_ms);
                change.ended = true;
            }
            // bash redraws its prompt when Enter is pressed (its integration reads the line
            // then): one prompt, however many A marks, until a command runs.
            if (!at_prompt_) {
                ++prompts_;
                change.prompt = true;
            }
            at_prompt_ = true;
            break;
        case ShellMark::Kind::CommandInput:
            if (!current_) at_prompt_ = true;
            break;
        case ShellMark::Kind::OutputStart: {
            if (current_) {
                end_current(mark.offset, std::nullopt, now_ms);
                change.ended = true;
            }
            protocol::CommandRecord record;
            record.seq = next_seq_++;
            record.command = mark.text;
            record.cwd = cwd_;
            record.output_start = mark.offset;
            record.started_ms = now_ms;
            current_ = std::move(record);
            at_prompt_ = false;
            change.started = true;
            break;
        }
        case ShellMark::Kind::CommandEnd:
            // A D with no command (the first prompt of some shells, an empty line) ends nothing.
            if (current_) {
                end_current(mark.offset, mark.exit_code, now_ms);
                change.ended = true;
            }
            break;
        case ShellMark::Kind::Cwd: cwd_ = mark.text; break;
    }
    return change;
}

void CommandTracker::end_current(std::uint64_t output_end, std::optional<int> exit_code, std::int64_t now_ms) {
    auto record = std::move(*current_);
    current_.reset();
    record.output_end = std::max(output_end, record.output_start);
    record.exit_code = exit_code;
    record.ended_ms = now_ms;
    last_ended_seq_ = record.seq;
    keep(std::move(record));
}

void CommandTracker::keep(protocol::CommandRecord record) {
    text_bytes_ += record.command.size() + record.cwd.size();
    ended_.push_back(std::move(record));
    while (ended_.size() > kMaxRecords || (text_bytes_ > kMaxTextBytes && ended_.size() > 1)) {
        text_bytes_ -= ended_.front().command.size() + ended_.front().cwd.size();
        ended_.pop_front();
    }
}

const protocol::CommandRecord* CommandTracker::ended_after(std::uint64_t after) const {
    for (const auto& r : ended_)
        if (r.seq > after) return &r;
    return nullptr;
}

std::optional<protocol::CommandRecord> CommandTracker::last() const {
    if (current_) return current_;
    if (!ended_.empty()) return ended_.back();
    return std::nullopt;
}

}  // namespace ptyvisor::server
