// What the daemon accepts from the screen worker (server/screen_broker.h): answers of the
// forms a terminal sends, and SCREEN replies of the session's shape, nothing else.
#include <gtest/gtest.h>

#include "protocol/screen_payloads.h"
#include "screen/emulator.h"
#include "server/screen_broker.h"

namespace ptyvisor {
namespace {

using server::is_terminal_answer;

TEST(TerminalAnswers, TheFormsATerminalSends) {
    for (const char* ok : {"\x1b[12;40R", "\x1b[?1;1R", "\x1b[0n", "\x1b[?1;2c", "\x1b[>0;100;0c", "\x1b[?25;1$y",
                           "\x1bP1$rm\x1b\\", "\x1bP0$r\x1b\\", "\x1b]10;rgb:f0f0/f0f0/f0f0\x1b\\",
                           "\x1b]11;rgb:0/0/0\x07", "\x1b]4;12;rgb:ffff/0000/0000\x1b\\", "\x1b[1;1R\x1b[0n"})
        EXPECT_TRUE(is_terminal_answer(ok)) << ok + 1;
}

TEST(TerminalAnswers, AnythingElseIsRefused) {
    for (const char* bad : {"", "ls\r", "\x1b[1;1Rrm -rf /\r", "\x1b[>c", "\x1b[c", "\x1b[1;1", "\x1b[?1;2cX",
                            "\x1b]2;title\x07", "\x1b]10;rgb:zz/00/00\x1b\\", "\x1bP1$r\x03\x1b\\", "\x9b" "0n",
                            "\x1b[12;40H", "\x1b]52;c;cm0gLXJm\x07"})
        EXPECT_FALSE(is_terminal_answer(bad)) << bad;
}

TEST(TerminalAnswers, EveryAnswerTheEmulatorGivesPasses) {
    screen::Emulator e(80, 24, 0);
    for (std::string q : {"\x1b[6n", "\x1b[?6n", "\x1b[5n", "\x1b[c", "\x1b[>c", "\x1b[?25$p", "\x1bP$qm\x1b\\",
                          "\x1bP$q q\x1b\\", "\x1bP$qr\x1b\\", "\x1b]10;?\x07", "\x1b]11;?\x1b\\", "\x1b]4;200;?\x07",
                          "\x1b G\x1b[6n"}) {
        e.feed(std::span(reinterpret_cast<const std::uint8_t*>(q.data()), q.size()));
        const std::string a = e.take_answers();
        EXPECT_TRUE(is_terminal_answer(a)) << "query " << q.substr(1) << " answer " << (a.empty() ? "" : a.substr(1));
    }
}

protocol::ScreenReply small_screen() {
    protocol::ScreenReply s;
    s.cols = 10;
    s.rows = 2;
    s.lines = {"hello", ""};
    return s;
}

TEST(ScreenReplies, TheSessionsShapeOnly) {
    const protocol::ScreenBounds bounds{10, 2, 5, false};
    EXPECT_TRUE(protocol::decode_screen(protocol::encode(small_screen()), bounds));
    auto s = small_screen();
    s.rows = 3;
    s.lines.push_back("");
    EXPECT_FALSE(protocol::decode_screen(protocol::encode(s), bounds));  // not the session's size
    s = small_screen();
    s.lines.pop_back();
    EXPECT_FALSE(protocol::decode_screen(protocol::encode(s), bounds));  // a row missing
    s = small_screen();
    s.lines[0] = "\x1b]0;owned\x07";
    EXPECT_FALSE(protocol::decode_screen(protocol::encode(s), bounds));  // control characters
    s = small_screen();
    s.lines[0] = std::string(10 * 24 + 1, 'x');
    EXPECT_FALSE(protocol::decode_screen(protocol::encode(s), bounds));  // longer than a row can be
    s = small_screen();
    s.cursor_col = 10;
    EXPECT_FALSE(protocol::decode_screen(protocol::encode(s), bounds));  // the cursor off the screen
    s = small_screen();
    s.scrollback.assign(6, "old");
    EXPECT_FALSE(protocol::decode_screen(protocol::encode(s), bounds));  // more scrollback than asked
    s = small_screen();
    s.attributes = std::vector<protocol::AttributeRun>{};
    EXPECT_FALSE(protocol::decode_screen(protocol::encode(s), bounds));  // attributes not asked for
    EXPECT_TRUE(protocol::decode_screen(protocol::encode(s), {10, 2, 5, true}));
    protocol::AttributeRun run;
    run.row = 1;
    run.col = 8;
    run.width = 3;
    s.attributes->push_back(run);
    EXPECT_FALSE(protocol::decode_screen(protocol::encode(s), {10, 2, 5, true}));  // past the last column
    EXPECT_FALSE(protocol::decode_screen("{\"cols\":10", bounds));
}

TEST(ScreenReplies, RoundTrip) {
    screen::Emulator e(20, 4, 10);
    const std::string text = "a\x1b[1;38;2;1;2;3mb\x1b[0m\r\n\xe4\xb8\xad\r\n\r\n\r\n\r\nz";
    e.feed(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
    auto s = e.snapshot(10, true);
    s.id = "0123456789abcdef0123456789abcdef";
    const auto d = protocol::decode_screen(protocol::encode(s), {20, 4, 10, true});
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, s);
}

}  // namespace
}  // namespace ptyvisor
