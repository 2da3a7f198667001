// CommandTracker: a session's command records (docs/protocol.md, 11.2), built from the shell's
// marks as the screen worker reports them (shell_mark.h).
//
// The marks come in log order, but a restarted worker (or a restarted daemon) replays the log
// from its start and reports them again: a mark at or before the last one applied is a replay,
// and is ignored. Marks are ordered by (offset, is D): every mark reports the offset past its
// end but D, which reports its first byte; so at one offset a mark that ended there came before
// a D that starts there (a command with no output), and the pair is strictly increasing.
//
// Invariants: at most one command runs (current); ended records are in seq order, at most
// kMaxRecords of them and at most kMaxTextBytes of their strings (the oldest go first);
// every string is a mark's, already bounded and checked by the broker.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "protocol/command_record.h"
#include "server/shell_mark.h"

namespace ptyvisor::server {

class CommandTracker {
  public:
    static constexpr std::size_t kMaxRecords = 128;
    static constexpr std::size_t kMaxTextBytes = 64 * 1024;

    // What applying a mark changed.
    struct Change {
        bool started = false;  // a command started: current() is it
        bool ended = false;    // a command ended: newest_ended() is it
        bool prompt = false;   // the shell shows its prompt
        [[nodiscard]] bool any() const { return started || ended || prompt; }
    };

    // Applies one mark, reported at `now_ms` (Unix milliseconds). A replayed mark changes nothing.
    Change apply(const ShellMark& mark, std::int64_t now_ms);

    // Whether any mark has been applied: the session's shell reports its commands.
    [[nodiscard]] bool has_marks() const { return has_marks_; }
    // The last mark was A or B, and no command runs.
    [[nodiscard]] bool at_prompt() const { return at_prompt_; }
    // Prompts shown so far (A marks): a watcher tells new ones by the count.
    [[nodiscard]] std::uint64_t prompts() const { return prompts_; }
    [[nodiscard]] const std::optional<protocol::CommandRecord>& current() const { return current_; }
    [[nodiscard]] const std::deque<protocol::CommandRecord>& ended() const { return ended_; }
    // The seq of the newest ended record, or 0; the seq the next command will get is
    // newest_seq() + 1.
    [[nodiscard]] std::uint64_t last_ended_seq() const { return last_ended_seq_; }
    [[nodiscard]] std::uint64_t newest_seq() const { return next_seq_ - 1; }
    [[nodiscard]] std::uint64_t first_seq() const { return ended_.empty() ? (current_ ? current_->seq : 0) : ended_.front().seq; }
    // The ended record with the smallest seq greater than `after`, if one is kept.
    [[nodiscard]] const protocol::CommandRecord* ended_after(std::uint64_t after) const;
    // The running record, else the newest ended one.
    [[nodiscard]] std::optional<protocol::CommandRecord> last() const;

  private:
    void end_current(std::uint64_t output_end, std::optional<int> exit_code, std::int64_t now_ms);
    void keep(protocol::CommandRecord record);

    bool has_marks_ = false;
    bool at_prompt_ = false;
    std::uint64_t prompts_ = 0;
    std::uint64_t next_seq_ = 1;
    std::uint64_t last_ended_seq_ = 0;
    // The last mark applied, as (offset, is D); nullopt before the first.
    std::optional<std::pair<std::uint64_t, bool>> last_mark_;
    std::string cwd_;
    std::optional<protocol::CommandRecord> current_;
    std::deque<protocol::CommandRecord> ended_;
    std::size_t text_bytes_ = 0;  // of ended_'s strings
};

}  // namespace ptyvisor::server
