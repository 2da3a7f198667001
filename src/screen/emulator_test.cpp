#include "screen/emulator.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>

namespace ptyvisor::screen {
namespace {

void feed(Emulator& e, std::string_view s) {
    e.feed(std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
}

TEST(Emulator, ShowsTextTrimmedWithTheCursorAfterIt) {
    Emulator e(20, 3, 10);
    feed(e, "hello   \r\nworld");
    const auto s = e.snapshot(0, false);
    ASSERT_EQ(s.lines.size(), 3u);
    EXPECT_EQ(s.lines[0], "hello");
    EXPECT_EQ(s.lines[1], "world");
    EXPECT_EQ(s.lines[2], "");
    EXPECT_EQ(s.cursor_row, 1);
    EXPECT_EQ(s.cursor_col, 5);
    EXPECT_TRUE(s.cursor_visible);
}

// A fresh screen is blank with the cursor home, and a REP (CSI Ps b) before any character
// prints nothing, as in xterm (libvterm 0.1.4 looped for ever on it: a session's output could
// hold the screen worker with six bytes; REP no longer reaches it, rep_expander.h).
TEST(Emulator, ARepeatBeforeAnyCharacterEnds) {
    Emulator fresh(20, 3, 10);
    const auto blank = fresh.snapshot(0, true);
    for (const auto& line : blank.lines) EXPECT_EQ(line, "");
    EXPECT_EQ(blank.cursor_row, 0);
    EXPECT_EQ(blank.cursor_col, 0);
    Emulator e(20, 3, 10);
    feed(e, "\x1b[6bok");
    const auto s = e.snapshot(0, false);
    EXPECT_EQ(s.lines[0], "ok");
    EXPECT_EQ(s.cursor_col, 2);
    feed(e, "\r\nx\x1b[3b");
    EXPECT_EQ(e.snapshot(0, false).lines[1], "xxxx");
}

// A REP shows what printing its character that many times shows, attributes and cursor
// included: plain, wide, with a combining mark, line-drawing (the G0 set), the default count,
// wrapping at the right margin, after controls and sequences (the last character printed is
// repeated, as in xterm), and a REP cut across writes.
TEST(Emulator, ARepeatShowsWhatPrintingTheCharacterThatOftenShows) {
    const std::pair<std::string_view, std::string_view> cases[] = {
        {"ab\x1b[4b", "abbbbb"},
        {"\x1b[1;31mx\x1b[b!", "\x1b[1;31mxx!"},
        {"\xe7\x95\x8c\x1b[2b", "\xe7\x95\x8c\xe7\x95\x8c\xe7\x95\x8c"},
        {"e\xcc\x81\x1b[2b", "e\xcc\x81" "e\xcc\x81" "e\xcc\x81"},
        {"\x1b(0q\x1b[3b\x1b(B", "\x1b(0qqqq\x1b(B"},
        {"\x1b[18Gy\x1b[4b", "\x1b[18Gyyyyy"},
        {"\x1b[?7l\x1b[18Gy\x1b[4b", "\x1b[?7l\x1b[18Gyyyyy"},
        {"\x1b[19G\xe7\x95\x8c\x1b[1b", "\x1b[19G\xe7\x95\x8c\xe7\x95\x8c"},
        {"a\r\n\x1b[3b", "a\r\naaa"},
        {"a\x1b[?25l\x1b[7m\x1b[2b", "a\x1b[?25l\x1b[7maa"},
        {"\xe7\x95\x8c\x1b[?7l\x1b[20G\x1b[3b", "\xe7\x95\x8c\x1b[?7l\x1b[20G\xe7\x95\x8c\xe7\x95\x8c\xe7\x95\x8c"},
    };
    for (const auto& [with_rep, printed] : cases) {
        Emulator whole(20, 3, 10), cut(20, 3, 10), reference(20, 3, 10);
        feed(whole, with_rep);
        for (const char byte : with_rep) feed(cut, std::string_view(&byte, 1));
        feed(reference, printed);
        EXPECT_EQ(whole.snapshot(10, true), reference.snapshot(10, true)) << with_rep;
        EXPECT_EQ(cut.snapshot(10, true), reference.snapshot(10, true)) << with_rep;
    }
}

// A REP after a combining mark printed alone prints nothing (it has no width: libvterm
// 0.1.4's own REP looped for ever on it, and xterm repeats only characters with a width);
// a CSI b with a leader or an intermediate is not a REP.
TEST(Emulator, ARepeatAfterAMarkAlonePrintsNothing) {
    const std::pair<std::string_view, std::string_view> cases[] = {
        {"\x1b[5G\xcc\x81\x1b[3b", "\x1b[5G\xcc\x81"},
        {"a\x1b[5G\xcc\x81\x1b[3b", "a\x1b[5G\xcc\x81"},
        {"a\x1b[?3b", "a"},   // a leader: not REP
        {"a\x1b[3 b", "a"},   // an intermediate: not REP
    };
    for (const auto& [with_rep, printed] : cases) {
        Emulator e(20, 3, 10), reference(20, 3, 10);
        feed(e, with_rep);
        feed(reference, printed);
        EXPECT_EQ(e.snapshot(10, true), reference.snapshot(10, true)) << with_rep;
    }
}

// CSI 99999999 b costs a row of characters at most: the count is cut to the columns. From
// the top-left corner, that and the character before it fill the first row and one more
// cell; nothing scrolls off (uncut, the scrollback's thousand lines would).
TEST(Emulator, AHugeRepeatCountIsBoundedByARow) {
    Emulator e(20, 3, 1000);
    feed(e, "\x1b[Hx\x1b[99999999b");
    const auto s = e.snapshot(1000, false);
    EXPECT_EQ(s.lines[0], std::string(20, 'x'));
    EXPECT_EQ(s.lines[1], "x");
    EXPECT_EQ(s.lines[2], "");
    EXPECT_EQ(s.scrollback.size(), 0u);
}

// libvterm 0.1.4's parser writes a CSI's arguments past its array of 16 (into its callback
// pointers): 17 arguments crashed the worker. Such a CSI is cancelled whole; 16 still work.
// Also cut byte by byte.
TEST(Emulator, ACsiWithMoreArgumentsThanLibvtermHoldsDoesNotCrashTheWorker) {
    std::string sixteen = "\x1b[", seventeen = "\x1b[", thousands = "\x1b[";
    for (int i = 0; i < 15; ++i) sixteen += "0;";
    for (int i = 0; i < 16; ++i) seventeen += "0;";
    for (int i = 0; i < 3000; ++i) thousands += i % 2 ? "1:" : "2;";
    sixteen += "1mA";
    seventeen += "1mB";
    thousands += "1 mC";
    for (const bool cut : {false, true}) {
        Emulator e(20, 3, 10);
        for (const std::string& s : {sixteen, seventeen, thousands}) {
            if (!cut) feed(e, s);
            else for (const char byte : s) feed(e, std::string_view(&byte, 1));
        }
        const auto s = e.snapshot(0, true);
        EXPECT_EQ(s.lines[0], "ABC");
        ASSERT_TRUE(s.attributes && s.attributes->size() == 1u);
        EXPECT_EQ((*s.attributes)[0].width, 3);  // bold from the 16, the others left it
        EXPECT_TRUE((*s.attributes)[0].bold);
    }
}

// libvterm 0.1.4 prints a C1 control encoded in UTF-8 (here U+009B) as a character of width
// -1: the cursor goes to column -1, and a character inserted there (insert mode) moved a
// negative number of cells, a segfault (found by a random run over REP's pieces). Such code
// points are controls and are dropped.
TEST(Emulator, APrintedC1ControlDoesNotCrashTheWorker) {
    for (const std::string_view attack :
         {"\x1b[4h\x1b" "0\xc2\x9b@", "\x1b[4h\xc2\x9b\xc2\x85@", "ab\xc2\x80@"}) {
        Emulator e(26, 4, 10);
        feed(e, attack);
        const auto s = e.snapshot(0, false);
        EXPECT_EQ(s.lines[0].back(), '@') << attack;
        EXPECT_EQ(s.cursor_col, s.lines[0].size()) << attack;
    }
}

TEST(Emulator, WideCharactersTakeTwoCellsAndCombiningMarksStay) {
    Emulator e(10, 2, 0);
    feed(e, "\xe4\xb8\xad\xe6\x96\x87x e\xcc\x81");  // 中文x é (e + combining acute)
    const auto s = e.snapshot(0, false);
    EXPECT_EQ(s.lines[0], "\xe4\xb8\xad\xe6\x96\x87x e\xcc\x81");
    EXPECT_EQ(s.cursor_col, 7);  // 2 + 2 + 1 + 1 + 1
}

// libvterm 0.1.4 wrote through a NULL pointer on this (found by fuzz_screen): the emulator
// must survive it, and show what tmux shows, a blank.
TEST(Emulator, AWideCharacterOnAOneColumnScreenIsABlankNotACrash) {
    Emulator e(1, 3, 10);
    feed(e, "\xe3\x83\x88" "a\r\n");  // ト (two columns wide), then a
    const auto s = e.snapshot(10, true);
    EXPECT_EQ(s.cols, 1);
    for (const auto& line : s.lines) EXPECT_LE(line.size(), 1u) << line;
    EXPECT_LE(s.cursor_col, 0);
}

TEST(Emulator, KeepsScrollbackUpToItsLimit) {
    Emulator e(10, 2, 3);
    for (int i = 0; i < 6; ++i) feed(e, std::to_string(i) + "\r\n");
    const auto s = e.snapshot(100, false);
    EXPECT_EQ(s.lines[0], "5");
    ASSERT_EQ(s.scrollback.size(), 3u);
    EXPECT_EQ(s.scrollback[0], "2");
    EXPECT_EQ(s.scrollback[2], "4");
    EXPECT_EQ(e.snapshot(1, false).scrollback, std::vector<std::string>{"4"});
}

TEST(Emulator, AlternateScreenTitleAndHiddenCursor) {
    Emulator e(10, 2, 0);
    feed(e, "main\x1b]2;my title\x07\x1b[?1049h\x1b[?25lalt");
    auto s = e.snapshot(0, false);
    EXPECT_TRUE(s.alternate);
    EXPECT_FALSE(s.cursor_visible);
    EXPECT_EQ(s.title, "my title");
    EXPECT_EQ(s.lines[0], "    alt");  // the cursor stays where it was, as in xterm
    feed(e, "\x1b[?1049l\x1b[?25h");
    s = e.snapshot(0, false);
    EXPECT_FALSE(s.alternate);
    EXPECT_EQ(s.lines[0], "main");
}

TEST(Emulator, AttributesComeAsRunsOfNonDefaultCells) {
    Emulator e(10, 2, 0);
    feed(e, "a\x1b[1;31mbc\x1b[0md\x1b[48;2;1;2;3me");
    const auto s = e.snapshot(0, true);
    ASSERT_TRUE(s.attributes);
    ASSERT_EQ(s.attributes->size(), 2u);
    const auto& bold = (*s.attributes)[0];
    EXPECT_EQ(bold.col, 1);
    EXPECT_EQ(bold.width, 2);
    EXPECT_TRUE(bold.bold);
    EXPECT_EQ(bold.fg, (protocol::Colour{protocol::Colour::Kind::Indexed, 1}));
    const auto& rgb = (*s.attributes)[1];
    EXPECT_EQ(rgb.col, 4);
    EXPECT_EQ(rgb.bg, (protocol::Colour{protocol::Colour::Kind::Rgb, 0x010203}));
}

TEST(Emulator, AnswersTheQueriesOfATerminal) {
    Emulator e(80, 24, 0);
    feed(e, "ab\x1b[6n");
    EXPECT_EQ(e.take_answers(), "\x1b[1;3R");
    feed(e, "\x1b[5n");
    EXPECT_EQ(e.take_answers(), "\x1b[0n");
    feed(e, "\x1b[c");
    EXPECT_EQ(e.take_answers().substr(0, 3), "\x1b[?");
    feed(e, "\x1b[>c");
    EXPECT_EQ(e.take_answers().substr(0, 3), "\x1b[>");
    feed(e, "\x1b]11;?\x07");
    EXPECT_EQ(e.take_answers(), "\x1b]11;rgb:0000/0000/0000\x1b\\");
    feed(e, "\x1b]10;?\x1b\\");
    EXPECT_EQ(e.take_answers().substr(0, 9), "\x1b]10;rgb:");
    EXPECT_EQ(e.take_answers(), "");
}

TEST(Emulator, ShrinkingAndGrowingKeepsTheText) {
    Emulator e(20, 4, 100);
    for (int i = 0; i < 6; ++i) feed(e, "line" + std::to_string(i) + "\r\n");
    e.resize(20, 2);
    EXPECT_EQ(e.snapshot(0, false).lines[0], "line5");
    e.resize(30, 5);
    const auto s = e.snapshot(0, false);
    EXPECT_EQ(s.cols, 30);
    EXPECT_EQ(s.lines.size(), 5u);
}

// libvterm 0.1.4 put the cursor on a negative row when a shrink pushed lines that were below
// it into the scrollback; the next character was then written before the line table
// (fuzz_screen, instrumented libvterm). The cursor goes to the first line, as in later libvterm.
TEST(Emulator, ShrinkingBelowAnOccupiedBottomKeepsTheCursorOnTheScreen) {
    Emulator e(20, 10, 100);
    feed(e, "\x1b[10;1Hbottom\x1b[1;1H");
    e.resize(20, 4);
    auto s = e.snapshot(10, false);
    EXPECT_EQ(s.cursor_row, 0);
    EXPECT_EQ(s.lines[3], "bottom");
    feed(e, "X");
    s = e.snapshot(10, false);
    EXPECT_EQ(s.lines[0], "X");
    EXPECT_EQ(s.lines[3], "bottom");
    EXPECT_EQ(s.cursor_row, 0);
    EXPECT_EQ(s.cursor_col, 1);
}

// libvterm 0.1.4 kept a top margin below the new bottom after a shrink, and the next scroll
// moved a negative number of lines (a memmove of negative size). A resize resets the margins,
// as xterm's does, and the whole screen scrolls.
TEST(Emulator, AScrollRegionBelowTheNewBottomIsResetByTheResize) {
    Emulator e(20, 24, 100);
    feed(e, "\x1b[10;20r\x1b[12;1Hregion");
    e.resize(20, 4);
    feed(e, "\x1b[4;1H\x1b[Ka\r\nb\r\nc");  // "region" was on the last row
    const auto s = e.snapshot(10, false);
    EXPECT_EQ(s.lines[0], "");
    EXPECT_EQ(s.lines[1], "a");
    EXPECT_EQ(s.lines[2], "b");
    EXPECT_EQ(s.lines[3], "c");
    EXPECT_EQ(s.cursor_row, 3);
}

// A title is shown as text: characters kept, ill-formed bytes one U+FFFD per maximal subpart
// (an overlong "A" is not an "A"), control characters replaced.
TEST(Emulator, ATitleKeepsCharactersAndReplacesTheRest) {
    Emulator e(20, 2, 0);
    feed(e, "\x1b]2;\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80\x07");
    EXPECT_EQ(e.snapshot(0, false).title, "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80");
    feed(e, "\x1b]2;a\xc1\x81" "b\xe2\x82" "c\xc2\x85" "d\x07");
    const std::string fffd = "\xef\xbf\xbd";
    EXPECT_EQ(e.snapshot(0, false).title, "a" + fffd + fffd + "b" + fffd + "c" + fffd + "d");
}

// An unfinished character at the end of one write and ASCII at the start of the next
// overflowed libvterm 0.1.4's code point array (emulator.h): it shows as one U+FFFD.
TEST(Emulator, ACharacterLeftUnfinishedBetweenWritesIsOneReplacement) {
    Emulator e(20, 2, 0);
    feed(e, "hello\xe2\x82");
    feed(e, "K \xe4\xb8");
    feed(e, "\xad!");
    const auto s = e.snapshot(0, false);
    EXPECT_EQ(s.lines[0], "hello\xef\xbf\xbdK \xe4\xb8\xad!");
}

}  // namespace
}  // namespace ptyvisor::screen
