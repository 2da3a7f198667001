#include "cli/mcp/screen_view.h"

#include <gtest/gtest.h>

namespace ptyvisor::cli::mcp {
namespace {

const std::string kId = "0123456789abcdef0123456789abcdef";

protocol::ScreenReply screen(std::uint16_t cols, std::uint16_t rows, std::vector<std::string> lines) {
    protocol::ScreenReply s;
    s.id = kId;
    s.cols = cols;
    s.rows = rows;
    s.lines = std::move(lines);
    s.lines.resize(rows);
    return s;
}

TEST(ScreenView, AHeaderThenNumberedRowsAndTheBlankBottomInOneLine) {
    auto s = screen(80, 24, {"$ ls", "a  b", "", "$"});
    s.cursor_row = 3;
    s.cursor_col = 2;
    s.offset = 1234;
    EXPECT_EQ(screen_view_text(s),
              "size: 80 cols x 24 rows\n"
              "cursor: row 3, col 2\n"
              "alternate screen: no\n"
              "title: \"\"\n"
              "offset: 1234\n"
              " 0|$ ls\n"
              " 1|a  b\n"
              " 2|\n"
              " 3|$\n"
              "(rows 4-23 are blank)\n");
}

TEST(ScreenView, AFullScreenProgramWithATitleAndAHiddenCursor) {
    auto s = screen(20, 3, {"~", "~", "\"notes.txt\" 0L"});
    s.alternate = true;
    s.cursor_visible = false;
    s.title = "notes.txt (~) - VIM \"quoted\"";
    EXPECT_EQ(screen_view_text(s),
              "size: 20 cols x 3 rows\n"
              "cursor: row 0, col 0 (hidden)\n"
              "alternate screen: yes (a full-screen program is showing)\n"
              "title: \"notes.txt (~) - VIM \\\"quoted\\\"\"\n"
              "offset: 0\n"
              "0|~\n"
              "1|~\n"
              "2|\"notes.txt\" 0L\n");
}

TEST(ScreenView, ScrollbackCountsBackFromMinusOneAndSetsTheWidth) {
    auto s = screen(10, 2, {"top", ""});
    s.scrollback = {"oldest", "older", "newest"};
    EXPECT_EQ(screen_view_text(s).substr(std::string("size: 10 cols x 2 rows\ncursor: row 0, col 0\n"
                                                     "alternate screen: no\ntitle: \"\"\noffset: 0\n")
                                             .size()),
              "-3|oldest\n"
              "-2|older\n"
              "-1|newest\n"
              " 0|top\n"
              "(row 1 is blank)\n");
}

TEST(ScreenView, ABlankScreenIsOneLine) {
    const auto text = screen_view_text(screen(80, 24, {}));
    EXPECT_NE(text.find("\n(rows 0-23 are blank)\n"), std::string::npos) << text;
    EXPECT_EQ(text.find('|'), std::string::npos) << text;
}

TEST(ScreenView, AttributesAreListedOnlyWhenAsked) {
    auto s = screen(10, 1, {"ok fail"});
    EXPECT_EQ(screen_view_text(s).find("attributes"), std::string::npos);
    s.attributes.emplace();
    EXPECT_NE(screen_view_text(s).find("attributes: none"), std::string::npos);
    protocol::AttributeRun green;
    green.width = 2;
    green.bold = true;
    green.fg = {protocol::Colour::Kind::Indexed, 2};
    protocol::AttributeRun red;
    red.col = 3;
    red.width = 4;
    red.underline = 2;
    red.reverse = true;
    red.bg = {protocol::Colour::Kind::Rgb, 0x102030};
    s.attributes = std::vector{green, red};
    const auto text = screen_view_text(s);
    EXPECT_NE(text.find("\n0,0 x2: bold fg=2\n0,3 x4: reverse double-underline bg=#102030\n"), std::string::npos)
        << text;
}

TEST(ScreenView, TheStructuredContentIsTheScreenPayload) {
    auto s = screen(80, 2, {"hello", ""});
    s.cursor_row = 1;
    s.title = "t";
    s.offset = 6;
    s.scrollback = {"up"};
    const auto j = screen_view_json(s);
    EXPECT_EQ(j.at("id"), kId);
    EXPECT_EQ(j.at("cols"), 80);
    EXPECT_EQ(j.at("rows"), 2);
    EXPECT_EQ(j.at("cursor"), (nlohmann::json{{"row", 1}, {"col", 0}, {"visible", true}}));
    EXPECT_EQ(j.at("alternate"), false);
    EXPECT_EQ(j.at("title"), "t");
    EXPECT_EQ(j.at("offset"), 6);
    EXPECT_EQ(j.at("lines"), (nlohmann::json{"hello", ""}));
    EXPECT_EQ(j.at("scrollback"), (nlohmann::json{"up"}));
    EXPECT_FALSE(j.contains("attributes"));
    protocol::AttributeRun bold;
    bold.width = 5;
    bold.bold = true;
    s.attributes = std::vector{bold};
    EXPECT_EQ(screen_view_json(s).at("attributes").at(0).at("bold"), true);
}

}  // namespace
}  // namespace ptyvisor::cli::mcp
