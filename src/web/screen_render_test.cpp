#include "web/screen_render.h"

#include <gtest/gtest.h>

namespace ptyvisor::web {
namespace {

protocol::ScreenReply screen(std::vector<std::string> lines) {
    protocol::ScreenReply s;
    s.cols = 10;
    s.rows = static_cast<std::uint16_t>(lines.size());
    s.lines = std::move(lines);
    return s;
}

TEST(RenderScreen, LinesThenTheCursor) {
    auto s = screen({"$ ls", "a  b", ""});
    s.cursor_row = 2;
    s.cursor_col = 0;
    EXPECT_EQ(render_screen(s), "$ ls\r\na  b\r\n\x1b[3;1H");
}

TEST(RenderScreen, ScrollbackFirstSoThatItScrollsOff) {
    auto s = screen({"b", "c"});
    s.scrollback = {"old1", "old2"};
    s.cursor_row = 1;
    s.cursor_col = 1;
    EXPECT_EQ(render_screen(s), "old1\r\nold2\r\nb\r\nc\x1b[2;2H");
}

TEST(RenderScreen, AlternateScreenHiddenCursorAndTitle) {
    auto s = screen({"vim"});
    s.alternate = true;
    s.scrollback = {"never written on the alternate screen"};
    s.cursor_visible = false;
    s.title = "edit";
    EXPECT_EQ(render_screen(s), "\x1b[?1049h\x1b]2;edit\x07vim\x1b[1;1H\x1b[?25l");
}

TEST(RenderScreen, AttackTitleCannotEndItsSequenceEarly) {
    auto s = screen({""});
    s.title = "x\x07\x1b]0;evil\x1b\\\xc2\x9b" "2J";
    const auto out = render_screen(s);
    EXPECT_EQ(out, "\x1b]2;x]0;evil\\2J\x07\x1b[1;1H");
}

TEST(RenderScreen, AttackLineWithControlsIsWrittenAsBlanks) {
    auto s = screen({"a\x1b[2Jb\x07"});
    EXPECT_EQ(render_screen(s), "a [2Jb \x1b[1;1H");
}

TEST(RenderScreen, AttributeRunsBecomeSgrAtTheirColumns) {
    auto s = screen({"ok fail"});
    protocol::AttributeRun green;
    green.row = 0;
    green.col = 0;
    green.width = 2;
    green.fg = {protocol::Colour::Kind::Indexed, 2};
    protocol::AttributeRun red;
    red.row = 0;
    red.col = 3;
    red.width = 4;
    red.bold = true;
    red.fg = {protocol::Colour::Kind::Rgb, 0xff0010};
    red.bg = {protocol::Colour::Kind::Indexed, 200};
    s.attributes = std::vector<protocol::AttributeRun>{green, red};
    EXPECT_EQ(render_screen(s), "\x1b[0;32mok\x1b[0m \x1b[0;1;38;2;255;0;16;48;5;200mfail\x1b[0m\x1b[1;1H");
}

TEST(RenderScreen, AColouredBackgroundPastTheTextIsDrawn) {
    auto s = screen({"a"});
    protocol::AttributeRun bar;
    bar.width = 3;
    bar.bg = {protocol::Colour::Kind::Indexed, 12};
    s.attributes = std::vector<protocol::AttributeRun>{bar};
    EXPECT_EQ(render_screen(s), "\x1b[0;104ma  \x1b[0m\x1b[1;1H");
}

TEST(RenderScreen, WideCharactersTakeTwoColumns) {
    auto s = screen({"\xe4\xb8\xad" "x"});  // U+4E2D then x: x is at column 2
    protocol::AttributeRun x;
    x.col = 2;
    x.width = 1;
    x.underline = 1;
    s.attributes = std::vector<protocol::AttributeRun>{x};
    EXPECT_EQ(render_screen(s), "\xe4\xb8\xad\x1b[0;4mx\x1b[0m\x1b[1;1H");
}

TEST(RenderScreen, CombiningMarksStayWithTheirCell) {
    auto s = screen({"e\xcc\x81z"});  // e + U+0301, then z at column 1
    protocol::AttributeRun z;
    z.col = 1;
    z.width = 1;
    z.reverse = true;
    s.attributes = std::vector<protocol::AttributeRun>{z};
    EXPECT_EQ(render_screen(s), "e\xcc\x81\x1b[0;7mz\x1b[0m\x1b[1;1H");
}

}  // namespace
}  // namespace ptyvisor::web
