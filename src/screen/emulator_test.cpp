#include "screen/emulator.h"

#include <gtest/gtest.h>

#include <string_view>

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

// A fresh screen is blank with the cursor home, and a REP (CSI Ps b) before any character is
// printed ends: libvterm 0.1.4 looped for ever on it (a session's output could hold the
// screen worker with six bytes). Without the priming in the constructor this test never ends.
TEST(Emulator, ARepeatBeforeAnyCharacterEnds) {
    Emulator fresh(20, 3, 10);
    const auto blank = fresh.snapshot(0, true);
    for (const auto& line : blank.lines) EXPECT_EQ(line, "");
    EXPECT_EQ(blank.cursor_row, 0);
    EXPECT_EQ(blank.cursor_col, 0);
    Emulator e(20, 3, 10);
    feed(e, "\x1b[6bok");
    const auto s = e.snapshot(0, false);
    EXPECT_EQ(s.lines[0], "      ok");
    EXPECT_EQ(s.cursor_col, 8);
    feed(e, "\r\nx\x1b[3b");
    EXPECT_EQ(e.snapshot(0, false).lines[1], "xxxx");
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
