#include "cli/mcp/condensed_output.h"

#include <gtest/gtest.h>

#include <string>

#include "common/utf8.h"

namespace ptyvisor::cli::mcp {
namespace {

std::string shown(std::string_view raw) { return condense(raw, 0, {.budget = 0}).text; }

TEST(CondensedOutput, ACarriageReturnOverwritesTheLineFromItsStart) {
    EXPECT_EQ(shown("50%\r100%\n"), "100%\n");
    EXPECT_EQ(shown("hello\rj"), "jello");
    EXPECT_EQ(shown("a\r\nb\r\n"), "a\nb\n");
    EXPECT_EQ(shown("Reading 0%\rReading 50%\rReading 100%\rReading... Done\r\nnext\r\n"), "Reading... Done\nnext\n");
}

TEST(CondensedOutput, BackspaceAndTabMoveTheCursorAsOnATerminal) {
    EXPECT_EQ(shown("abc\b\bX\n"), "aXc\n");
    EXPECT_EQ(shown("\b\bab\n"), "ab\n");  // not before the line's start
    EXPECT_EQ(shown("a\tb\n"), "a       b\n");
    EXPECT_EQ(shown("abcdefghij\r\tX\n"), "abcdefghXj\n");
}

TEST(CondensedOutput, EraseInLine) {
    EXPECT_EQ(shown("downloading 10%\r\x1b[Kdone\n"), "done\n");
    EXPECT_EQ(shown("abcdef\r\x1b[2Kxy\n"), "xy\n");
    EXPECT_EQ(shown("abcdef\x1b[3D\x1b[1K!\n"), "   !ef\n");  // erased up to the cursor, inclusive
    EXPECT_EQ(shown("abcdef\x1b[3D\x1b[K\n"), "abc\n");
}

TEST(CondensedOutput, ColoursAndOtherSequencesAreRemoved) {
    EXPECT_EQ(shown("\x1b[1;31mred\x1b[0m \x1b]0;title\x07plain\x1b[?25l\n"), "red plain\n");
    EXPECT_EQ(shown("caf\xc3\xa9\r\xe2\x82\xac\n"), "\xe2\x82\xac" "af\xc3\xa9\n");
    EXPECT_EQ(shown("a\xff"
                    "b\n"),
              "a\xEF\xBF\xBD"
              "b\n");
}

// The sequences of recorded output (bench/condense/measure.py), shortened.
TEST(CondensedOutput, RecordedProgressCollapses) {
    // npm's spinner: a braille frame, then back to column 1 and erase.
    EXPECT_EQ(shown("\xe2\xa0\x99\x1b[1G\x1b[0K\xe2\xa0\xb9\x1b[1G\x1b[0K\r\nadded 68 packages in 2s\r\n"
                    "\xe2\xa0\x8f\x1b[1G\x1b[0K"),
              "\nadded 68 packages in 2s\n");
    // curl -#: the bar redrawn after "\r", each frame as long as the last.
    EXPECT_EQ(shown("\r####      6.7%\r#######   9.8%\r########## 100.0%\r\n"), "########## 100.0%\n");
    // dd status=progress: each frame shorter or longer than the last, then the summary.
    EXPECT_EQ(shown("\r16834560 bytes copied, 1 s\r33619968 bytes copied, 2 s\r\n713+10323 records in\r\n"),
              "33619968 bytes copied, 2 s\n713+10323 records in\n");
    // apt-get: "Reading package lists... 0%" redrawn, then Done over it.
    EXPECT_EQ(shown("Reading package lists... 0%\rReading package lists... 100%\rReading package lists... Done\r\n"),
              "Reading package lists... Done\n");
}

// npm and docker redraw a block of progress lines: up N lines, rewrite each.
TEST(CondensedOutput, ARedrawnBlockOfLinesShowsItsLastState) {
    EXPECT_EQ(shown("start\nprogress 1\n\x1b[1Aprogress 2\n\x1b[1Aprogress 3\ndone\n"), "start\nprogress 3\ndone\n");
    EXPECT_EQ(shown("a: 1%\nb: 1%\n\x1b[2A\x1b[2Ka: 50%\n\x1b[2Kb: 9%\n\x1b[2F\x1b[2Ka: ok\n\x1b[2Kb: ok\n"),
              "a: ok\nb: ok\n");
    EXPECT_EQ(shown("x\ny\x1bMX\n"), "xX\ny");  // reverse index: up one line; the newline goes back down
    EXPECT_EQ(shown("one\ntwo\nthree\x1b[2A\r\x1b[J"), "");
    EXPECT_EQ(shown("one\ntwo\nthree\x1b[1A\x1b[1B!\n"), "one\ntwo\nthree!\n");
}

TEST(CondensedOutput, SaveAndRestoreTheCursor) {
    EXPECT_EQ(shown("Progress: \x1b" "7...\n\x1b" "850%\n"), "Progress: 50%\n");
    EXPECT_EQ(shown("a\x1b[sbc\x1b[uX\n"), "aXc\n");
}

// apt's progress bar: saved cursor, the bottom row, the bar, restored cursor.
TEST(CondensedOutput, AStatusLineDrawnElsewhereIsLeftOut) {
    const std::string bar = "\x1b" "7\x1b[50;0f\x1b[42mProgress: [ 20%]\x1b[49m [###....] \x1b" "8";
    EXPECT_EQ(shown("Unpacking x ...\r\n" + bar + "Setting up x ...\r\n" + bar + "\x1b[Jdone\r\n"),
              "Unpacking x ...\nSetting up x ...\ndone\n");
    EXPECT_EQ(shown("\x1b[H\x1b[2Jtop\n"), "top\n");  // with nothing saved, still ignored
}

TEST(CondensedOutput, OnlyTheLastLiveRowsCanBeRedrawn) {
    std::string raw;
    for (std::size_t i = 0; i < kLiveRows + 5; ++i) raw += "line " + std::to_string(i) + "\n";
    raw += "\x1b[1000A";  // up past every live line: stops at the oldest still live
    raw += "X";
    const std::string text = shown(raw);
    EXPECT_NE(text.find("line 0\nline 1\n"), std::string::npos);
    EXPECT_NE(text.find("Xine 6\n"), std::string::npos) << text;
}

TEST(CondensedOutput, ALongLineWraps) {
    const std::string text = shown(std::string(kMaxColumns + 10, 'x') + "\n");
    EXPECT_EQ(text, std::string(kMaxColumns, 'x') + "\n" + std::string(10, 'x') + "\n");
}

// Lines of "line N" ending with CRLF, N from 0 to count - 1.
std::string numbered_lines(int count) {
    std::string raw;
    for (int i = 0; i < count; ++i) raw += "\x1b[32mline\x1b[0m " + std::to_string(i) + "\r\n";
    return raw;
}

TEST(CondensedOutput, WithinTheBudgetNothingIsLeftOut) {
    const std::string raw = numbered_lines(10);
    const auto out = condense(raw, 500, {.budget = 4096});
    EXPECT_FALSE(out.truncated);
    EXPECT_EQ(out.omitted_bytes, 0u);
    EXPECT_EQ(out.text, shown(raw));
    EXPECT_EQ(out.consumed_to, 500 + raw.size());
}

// The property that matters: head + what the marker's offsets hold + tail is the whole text.
TEST(CondensedOutput, OverTheBudgetTheMarkerSaysWhereTheMiddleIs) {
    const std::string raw = numbered_lines(5000);
    const std::uint64_t base = 1000;
    const auto out = condense(raw, base, {.budget = 2048});
    ASSERT_TRUE(out.truncated);
    EXPECT_LE(out.text.size(), 2048u);
    EXPECT_EQ(out.text.rfind("line 0\n", 0), 0u);
    EXPECT_EQ(out.text.substr(out.text.size() - 10), "line 4999\n");

    const std::string marker = "[... " + std::to_string(out.omitted_bytes) + " bytes omitted (" +
                               std::to_string(out.omitted_to - out.omitted_from) + " bytes of log, offsets " +
                               std::to_string(out.omitted_from) + ".." + std::to_string(out.omitted_to) +
                               "); read them with terminal_read offset=" + std::to_string(out.omitted_from) +
                               " to=" + std::to_string(out.omitted_to) + " ...]\n";
    const auto at = out.text.find(marker);
    ASSERT_NE(at, std::string::npos) << out.text;
    EXPECT_GT(at, 2048u * 3 / 10);  // the head had about 40% of the budget

    const std::string middle = shown(std::string_view(raw).substr(out.omitted_from - base, out.omitted_to - out.omitted_from));
    EXPECT_EQ(middle.size(), out.omitted_bytes);
    EXPECT_EQ(out.text.substr(0, at) + middle + out.text.substr(at + marker.size()), shown(raw));
}

TEST(CondensedOutput, ABudgetSmallerThanTheMarkerGivesTheMarkerAlone) {
    const auto out = condense(numbered_lines(100), 0, {.budget = 10});
    EXPECT_TRUE(out.truncated);
    EXPECT_EQ(out.text.rfind("[... ", 0), 0u);
    EXPECT_EQ(out.omitted_from, 0u);
    EXPECT_EQ(out.omitted_to, numbered_lines(100).size());
    EXPECT_EQ(out.omitted_bytes, shown(numbered_lines(100)).size());
}

TEST(CondensedOutput, ALineLongerThanTheTailIsLeftOutWhole) {
    const std::string raw = "first\n" + std::string(5000, 'y') + "\nlast\n";
    const auto out = condense(raw, 0, {.budget = 1000});
    EXPECT_TRUE(out.truncated);
    EXPECT_EQ(out.text.rfind("first\n[... ", 0), 0u) << out.text;
    EXPECT_EQ(out.text.substr(out.text.size() - 5), "last\n");
    EXPECT_EQ(out.omitted_from, 6u);
    EXPECT_EQ(out.omitted_to, 5007u);
    EXPECT_EQ(out.omitted_bytes, 5001u);
}

const std::string kNoisy =
    "\x1b[1;31mred\x1b[0m plain\r\n"
    "\x1b]0;window title\x07"
    "50%\r\x1b[K100% caf\xc3\xa9 \xf0\x9f\x98\x80\r\n"
    "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n"
    "a\nb\n\x1b[2A\x1b[2KA\n\x1b[2KB\n"
    "\x1b[?25l\x1b[38;5;208mprogress 10%\rprogress 20%\x1b[?25h\r\n";

TEST(CondensedOutput, PiecesCutAnywhereGiveTheSameResult) {
    const auto whole = condense(kNoisy, 7, {.budget = 0});
    EXPECT_EQ(whole.text, "red plain\n100% caf\xc3\xa9 \xf0\x9f\x98\x80\nlink\nA\nB\nprogress 20%\n");
    for (std::size_t cut = 0; cut <= kNoisy.size(); ++cut) {
        Condenser condenser(7, {.budget = 0});
        condenser.feed(std::string_view(kNoisy).substr(0, cut));
        condenser.feed(std::string_view(kNoisy).substr(cut));
        EXPECT_EQ(condenser.finish(Ending::Final).text, whole.text) << "cut at " << cut;
    }
    Condenser bytewise(7, {.budget = 0});
    for (const char c : kNoisy) bytewise.feed(std::string_view(&c, 1));
    EXPECT_EQ(bytewise.finish(Ending::Final).text, whole.text);
}

TEST(CondensedOutput, NotFinalASplitSequenceIsHeldBack) {
    Condenser condenser(100, {});
    condenser.feed("abc\x1b[3");
    const auto out = condenser.finish(Ending::ForNow);
    EXPECT_EQ(out.text, "abc");
    EXPECT_EQ(out.consumed_to, 103u);
    EXPECT_EQ(condense("abc\xe2\x82", 0, {}).text, "abc\xEF\xBF\xBD");  // final: nothing held
}

TEST(CondensedOutput, KeepingEscapesOnlyTheBudgetApplies) {
    EXPECT_EQ(condense("\x1b[31m50%\r100%\n", 0, {.budget = 0, .keep_escapes = true}).text, "\x1b[31m50%\r100%\n");
    const std::string raw = numbered_lines(3000);
    const auto out = condense(raw, 10, {.budget = 4096, .keep_escapes = true});
    ASSERT_TRUE(out.truncated);
    EXPECT_LE(out.text.size(), 4096u);
    const auto at = out.text.find("[... ");
    const auto marker_end = out.text.find('\n', at) + 1;
    EXPECT_EQ(out.text.substr(0, at) + raw.substr(out.omitted_from - 10, out.omitted_to - out.omitted_from) +
                  out.text.substr(marker_end),
              raw);
    EXPECT_EQ(out.omitted_bytes, out.omitted_to - out.omitted_from);

    Condenser split(0, {.keep_escapes = true});
    split.feed("a\xe2\x82");
    const auto held = split.finish(Ending::ForNow);
    EXPECT_EQ(held.text, "a");
    EXPECT_EQ(held.consumed_to, 1u);
    EXPECT_TRUE(utf8::is_valid(condense(std::string(kMaxColumns - 1, 'x') + "\xe2\x82\xac!", 0,
                                        {.budget = 0, .keep_escapes = true})
                                   .text));
}

TEST(CondensedOutput, ACutRangeHoldsBackItsUnfinishedLastLine) {
    Condenser condenser(10, {});
    condenser.feed("one\ntwo\n50%\r6");
    const auto out = condenser.finish(Ending::Cut);
    EXPECT_EQ(out.text, "one\ntwo\n");
    EXPECT_EQ(out.consumed_to, 18u);
    Condenser alone(10, {});
    alone.feed("50%\r6");
    EXPECT_EQ(alone.finish(Ending::Cut).text, "60%");  // the only line: it is all there is to show
    Condenser raw(10, {.keep_escapes = true});
    raw.feed("one\n50%\r6");
    const auto kept = raw.finish(Ending::Cut);
    EXPECT_EQ(kept.text, "one\n");
    EXPECT_EQ(kept.consumed_to, 14u);
}

// Paging through a range in order, each page from where the last stopped, gives it all.
TEST(CondensedOutput, InOrderPagesGiveTheWholeText) {
    const std::string raw = numbered_lines(300) + std::string(3000, 'z') + "\n";
    for (const bool keep_escapes : {false, true}) {
        const CondenseOptions options{.budget = 1000, .keep_escapes = keep_escapes, .in_order = true};
        std::string all;
        int pages = 0;
        for (std::uint64_t at = 0; at < raw.size(); ++pages) {
            const auto page = condense(std::string_view(raw).substr(at), at, options);
            EXPECT_FALSE(page.truncated);
            EXPECT_LE(page.text.size(), 1000u);
            ASSERT_GT(page.consumed_to, at);
            all += page.text;
            at = page.consumed_to;
        }
        EXPECT_GT(pages, 5);
        const std::string whole = condense(raw, 0, {.budget = 0, .keep_escapes = keep_escapes}).text;
        if (keep_escapes) {
            EXPECT_EQ(all, whole);
        } else {
            // The 3000 z's wrap at a quarter of the budget: the pages have newlines more there.
            std::string unwrapped = all, expected = whole;
            std::erase(unwrapped, '\n');
            std::erase(expected, '\n');
            EXPECT_EQ(unwrapped, expected);
            EXPECT_NE(all.find(std::string(250, 'z') + "\n" + std::string(250, 'z')), std::string::npos);
        }
    }
}

TEST(CondensedOutput, TheTextIsBoundedByTheBudgetHoweverLongTheLog) {
    Condenser condenser(0, {.budget = 4096});
    const std::string block = numbered_lines(1000);
    for (int i = 0; i < 200; ++i) condenser.feed(block);
    const auto out = condenser.finish(Ending::Final);
    EXPECT_LE(out.text.size(), 4096u);
    EXPECT_EQ(out.consumed_to, 200 * block.size());
    EXPECT_GT(out.omitted_to, out.omitted_from);
    EXPECT_GT(out.omitted_bytes, 190u * shown(block).size());
}

}  // namespace
}  // namespace ptyvisor::cli::mcp
