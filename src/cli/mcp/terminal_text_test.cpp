#include "cli/mcp/terminal_text.h"

#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <string>

namespace ptyvisor::cli::mcp {
namespace {

std::string strip_all(std::string_view bytes) { return strip_terminal_output(bytes, ParseState::Ground, true).text; }

// Output that has every kind of sequence, and characters of 2, 3 and 4 bytes.
const std::string kSample =
    "\x1b[1;31mred\x1b[0m plain\r\n"  // CSI with parameters, CRLF
    "\x1b]0;window title\x07"
    "after-osc\n"                                 // OSC ended by BEL
    "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n"  // OSC ended by ST (a hyperlink)
    "\x1bPq#0;2;0;0;0\x1b\\after-dcs\n"           // DCS
    "\x1b(B\x1b=\x1b"
    "7caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n"  // ESC sequences, UTF-8
    "\x1b[?25l\x1b[38;5;208mprogress 10%\rprogress 20%\x1b[?25h\n";

const std::string kSampleText =
    "red plain\n"
    "after-osc\n"
    "link\n"
    "after-dcs\n"
    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n"
    "progress 10%\nprogress 20%\n";

TEST(TerminalText, RemovesEveryKindOfSequence) { EXPECT_EQ(strip_all(kSample), kSampleText); }

TEST(TerminalText, CsiWithParametersAndIntermediates) {
    EXPECT_EQ(strip_all("a\x1b[38;2;10;20;30mb\x1b[2 qc\x1b[?1049hd"), "abcd");
}

TEST(TerminalText, ControlCharactersOtherThanNewlineAndTabAreDropped) {
    EXPECT_EQ(strip_all("a\x07"
                        "b\x08"
                        "c\td\x7f"
                        "e\x0f\n"),
              "abc\tde\n");
}

TEST(TerminalText, InvalidUtf8BecomesReplacementCharacters) {
    EXPECT_EQ(strip_all("a\xff"
                        "b\xc3(c\xed\xa0\x80"),
              "a\xEF\xBF\xBD"
              "b\xEF\xBF\xBD(c\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TerminalText, AMalformedSequenceDoesNotSwallowTheText) {
    EXPECT_EQ(strip_all("\x1b[12\nnext"), "\nnext");  // a newline aborts the CSI
}

// The property that matters: wherever the output is cut, reading up to the cut and then
// from where the first read stopped gives the text of the whole.
TEST(TerminalText, ASplitAtEveryCutPointGivesTheSameText) {
    for (std::size_t cut = 0; cut <= kSample.size(); ++cut) {
        const auto first = strip_terminal_output(std::string_view(kSample).substr(0, cut), ParseState::Ground, false);
        ASSERT_LE(first.consumed, cut);
        const auto second = strip_terminal_output(std::string_view(kSample).substr(first.consumed), first.state, true);
        EXPECT_EQ(first.text + second.text, kSampleText) << "cut at " << cut;
    }
}

TEST(TerminalText, ChunksOfEverySizeGiveTheSameText) {
    // Longer than the longest sequence (17 bytes): shorter chunks cannot hold one whole.
    for (std::size_t size = 18; size <= kSample.size(); ++size) {
        std::string text;
        std::size_t at = 0;
        ParseState state = ParseState::Ground;
        while (at < kSample.size()) {
            const auto chunk = std::string_view(kSample).substr(at, size);
            const bool final = at + chunk.size() == kSample.size();
            const auto t = strip_terminal_output(chunk, state, final);
            ASSERT_GT(t.consumed, 0u) << "no progress at " << at << " with chunks of " << size;
            text += t.text;
            at += t.consumed;
            state = t.state;
        }
        EXPECT_EQ(text, kSampleText) << "chunks of " << size;
    }
}

// The same property over made-up output (a fixed seed, so any failure repeats): bytes that
// matter to the parser, mixed with text, cut everywhere.
TEST(TerminalText, RandomOutputSplitAnywhereGivesTheSameText) {
    static constexpr std::string_view kAlphabet[] = {
        "\x1b", "[", "]", "P", "\\", "\x07", "\r", "\n", "\t", ";", "1", "m", "(", "a", " ", "\xc3", "\xa9",
        "\xe2", "\x82", "\xac", "\xf0", "\x9f", "\x98", "\x80", "\xff", "\x7f", "\x08", "?", "~", "z"};
    std::mt19937 random(12345);
    for (int round = 0; round < 3000; ++round) {
        std::string bytes;
        const std::size_t pieces = random() % 120;
        for (std::size_t i = 0; i < pieces; ++i) bytes += kAlphabet[random() % std::size(kAlphabet)];
        const std::string whole = strip_all(bytes);
        for (std::size_t cut = 0; cut <= bytes.size(); ++cut) {
            const auto first =
                strip_terminal_output(std::string_view(bytes).substr(0, cut), ParseState::Ground, false);
            ASSERT_LE(first.consumed, cut);
            const auto second =
                strip_terminal_output(std::string_view(bytes).substr(first.consumed), first.state, true);
            ASSERT_EQ(first.text + second.text, whole) << "round " << round << ", cut at " << cut;
        }
    }
}

TEST(TerminalText, StopsBeforeASplitEscapeSequence) {
    const auto t = strip_terminal_output("ok\x1b[1;3", ParseState::Ground, false);
    EXPECT_EQ(t.text, "ok");
    EXPECT_EQ(t.consumed, 2u);
    EXPECT_EQ(t.state, ParseState::Ground);
}

TEST(TerminalText, StopsBeforeASplitUtf8Character) {
    const auto t = strip_terminal_output("caf\xc3", ParseState::Ground, false);
    EXPECT_EQ(t.text, "caf");
    EXPECT_EQ(t.consumed, 3u);
}

TEST(TerminalText, StopsBeforeACarriageReturnThatANewlineMayFollow) {
    const auto t = strip_terminal_output("line\r", ParseState::Ground, false);
    EXPECT_EQ(t.text, "line");
    EXPECT_EQ(t.consumed, 4u);
}

TEST(TerminalText, AtTheEndNothingIsHeldBack) {
    const auto t = strip_terminal_output("abc\x1b[1;3", ParseState::Ground, true);
    EXPECT_EQ(t.text, "abc");
    EXPECT_EQ(t.consumed, 8u);
    EXPECT_EQ(strip_terminal_output("x\xe2\x82", ParseState::Ground, true).text, "x\xEF\xBF\xBD");
}

TEST(TerminalText, AStringLongerThanTheHoldBackIsCarriedInTheState) {
    const std::string body(2 * kMaxHeldBack, 'a');
    const std::string bytes = "before\x1b]0;" + body + "\x07" + "after";
    const std::size_t cut = 6 + kMaxHeldBack + 100;
    const auto first = strip_terminal_output(std::string_view(bytes).substr(0, cut), ParseState::Ground, false);
    EXPECT_EQ(first.text, "before");
    EXPECT_EQ(first.consumed, cut);
    EXPECT_EQ(first.state, ParseState::String);
    const auto second = strip_terminal_output(std::string_view(bytes).substr(cut), first.state, true);
    EXPECT_EQ(second.text, "after");
}

TEST(TerminalText, AnEscapeAtTheEndOfAStringIsCarriedToo) {
    const auto second = strip_terminal_output("\\rest", ParseState::StringEscape, true);
    EXPECT_EQ(second.text, "rest");
}

TEST(TerminalText, RawKeepsSequencesAndCutsOnlyCharacters) {
    const auto t = raw_terminal_output("\x1b[31mr\xc3\xa9\xe2\x82", false);
    EXPECT_EQ(t.text, "\x1b[31mr\xc3\xa9");
    EXPECT_EQ(t.consumed, 8u);
    EXPECT_EQ(raw_terminal_output("a\xff", false).text, "a\xEF\xBF\xBD");
    EXPECT_EQ(raw_terminal_output("a\xe2\x82", true).text, "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace ptyvisor::cli::mcp
