#include "server/command_tracker.h"

#include <gtest/gtest.h>

namespace ptyvisor::server {
namespace {

using Kind = ShellMark::Kind;

ShellMark mark(Kind kind, std::uint64_t offset, std::string text = {}, std::optional<int> code = {}) {
    return ShellMark{kind, offset, code, std::move(text)};
}

// One prompt, command, output and end, as the integration scripts write them.
void run_command(CommandTracker& t, std::uint64_t& at, const std::string& line, std::uint64_t output, int code) {
    t.apply(mark(Kind::Prompt, at += 10), 1);
    t.apply(mark(Kind::Cwd, at += 20, "/tmp"), 1);
    t.apply(mark(Kind::CommandInput, at += 10), 1);
    t.apply(mark(Kind::OutputStart, at += 30 + line.size(), line), 2);
    at += output;
    t.apply(mark(Kind::CommandEnd, at, {}, code), 3);
    at += 12;
}

TEST(CommandTracker, BuildsOneRecordPerCommandWithItsOutputRange) {
    CommandTracker t;
    EXPECT_FALSE(t.has_marks());
    std::uint64_t at = 0;
    run_command(t, at, "make", 100, 2);
    ASSERT_EQ(t.ended().size(), 1u);
    const auto& r = t.ended().front();
    EXPECT_EQ(r.seq, 1u);
    EXPECT_EQ(r.command, "make");
    EXPECT_EQ(r.cwd, "/tmp");
    ASSERT_TRUE(r.output_end);
    EXPECT_EQ(*r.output_end - r.output_start, 100u);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.started_ms, 2);
    EXPECT_EQ(r.ended_ms, 3);
    EXPECT_FALSE(t.current());
    EXPECT_FALSE(t.at_prompt());  // D came; the prompt has not yet
    t.apply(mark(Kind::Prompt, at += 10), 4);
    EXPECT_TRUE(t.at_prompt());
    EXPECT_EQ(t.last_ended_seq(), 1u);
}

TEST(CommandTracker, ACommandWithoutOutputEndsWhereItStarted) {
    CommandTracker t;
    t.apply(mark(Kind::OutputStart, 50, "true"), 1);
    EXPECT_TRUE(t.current());
    EXPECT_FALSE(t.at_prompt());
    const auto change = t.apply(mark(Kind::CommandEnd, 50, {}, 0), 1);  // same offset: D after C
    EXPECT_TRUE(change.ended);
    ASSERT_EQ(t.ended().size(), 1u);
    EXPECT_EQ(t.ended().front().output_end, 50u);
}

TEST(CommandTracker, AReplayedLogChangesNothing) {
    CommandTracker t;
    std::uint64_t at = 0;
    run_command(t, at, "a", 5, 0);
    run_command(t, at, "b", 7, 1);
    const auto before = t.ended();
    // A restarted worker reports every mark again, from the log's start.
    std::uint64_t again = 0;
    run_command(t, again, "a", 5, 0);
    run_command(t, again, "b", 7, 1);
    EXPECT_EQ(t.ended(), before);
    EXPECT_EQ(t.newest_seq(), 2u);
    // Then the marks it had not reported yet are applied.
    run_command(t, again, "c", 3, 0);
    EXPECT_EQ(t.newest_seq(), 3u);
}

TEST(CommandTracker, DWithoutACommandEndsNothing) {
    CommandTracker t;
    EXPECT_FALSE(t.apply(mark(Kind::CommandEnd, 5, {}, 0), 1).ended);
    EXPECT_TRUE(t.ended().empty());
    EXPECT_TRUE(t.has_marks());
}

TEST(CommandTracker, ACommandThatNeverEndedIsClosedByTheNextPromptWithoutAStatus) {
    CommandTracker t;
    t.apply(mark(Kind::OutputStart, 10, "vi"), 1);
    const auto change = t.apply(mark(Kind::Prompt, 90), 2);
    EXPECT_TRUE(change.ended);
    EXPECT_TRUE(change.prompt);
    ASSERT_EQ(t.ended().size(), 1u);
    EXPECT_EQ(t.ended().front().exit_code, std::nullopt);
    EXPECT_EQ(t.ended().front().output_end, 90u);
}

TEST(CommandTracker, KeepsAtMostItsBoundOfRecordsAndText) {
    CommandTracker t;
    std::uint64_t at = 0;
    for (int i = 0; i < 300; ++i) run_command(t, at, "c" + std::to_string(i), 1, 0);
    EXPECT_EQ(t.ended().size(), CommandTracker::kMaxRecords);
    EXPECT_EQ(t.ended().back().seq, 300u);
    EXPECT_EQ(t.first_seq(), 300u - CommandTracker::kMaxRecords + 1);
    ASSERT_TRUE(t.ended_after(299));
    EXPECT_EQ(t.ended_after(299)->seq, 300u);
    EXPECT_EQ(t.ended_after(300), nullptr);

    CommandTracker big;
    at = 0;
    const std::string line(ShellMark::kMaxText, 'x');
    for (int i = 0; i < 100; ++i) run_command(big, at, line, 1, 0);
    std::size_t text = 0;
    for (const auto& r : big.ended()) text += r.command.size() + r.cwd.size();
    EXPECT_LE(text, CommandTracker::kMaxTextBytes);
    EXPECT_LT(big.ended().size(), 100u);
}

}  // namespace
}  // namespace ptyvisor::server
