// The one UTF-8 decoder (utf8.h): strictness, maximal subparts, and streaming.
#include "common/utf8.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>

namespace ptyvisor::utf8 {
namespace {

using Kind = Sequence::Kind;

const std::string kFFFD(kReplacement);

std::span<const std::uint8_t> bytes(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Each piece through one decoder, in order, without the flush; the concatenated output.
std::string through(std::initializer_list<std::string_view> pieces, StreamDecoder& d) {
    std::string out;
    for (auto p : pieces) d.decode(bytes(p), out);
    return out;
}

std::string through(std::initializer_list<std::string_view> pieces) {
    StreamDecoder d;
    return through(pieces, d);
}

TEST(Utf8Next, DecodesEachLengthToItsCodePoint) {
    const auto expect = [](std::string_view in, std::size_t length, char32_t code_point) {
        const Sequence s = next(in);
        EXPECT_EQ(s.kind, Kind::Character) << in;
        EXPECT_EQ(s.length, length) << in;
        EXPECT_EQ(s.code_point, code_point) << in;
    };
    expect("A", 1, U'A');
    expect(std::string_view("\0", 1), 1, 0);
    expect("\x7F", 1, 0x7F);
    expect("\xC2\x80", 2, 0x80);
    expect("\xC3\xA9xyz", 2, 0xE9);  // only the first character
    expect("\xDF\xBF", 2, 0x7FF);
    expect("\xE0\xA0\x80", 3, 0x800);
    expect("\xE2\x82\xAC", 3, 0x20AC);
    expect("\xED\x9F\xBF", 3, 0xD7FF);  // the last before the surrogates
    expect("\xEE\x80\x80", 3, 0xE000);  // the first after them
    expect("\xEF\xBF\xBD", 3, 0xFFFD);
    expect("\xF0\x90\x80\x80", 4, 0x10000);
    expect("\xF0\x9F\x98\x80", 4, 0x1F600);
    expect("\xF4\x8F\xBF\xBF", 4, 0x10FFFF);
}

TEST(Utf8Next, IllFormedIsTheMaximalSubpart) {
    const auto expect = [](std::string_view in, Kind kind, std::size_t length) {
        const Sequence s = next(in);
        EXPECT_EQ(s.kind, kind) << in;
        EXPECT_EQ(s.length, length) << in;
    };
    expect("\x80", Kind::IllFormed, 1);              // a lone continuation
    expect("\xC0\x80", Kind::IllFormed, 1);          // C0, C1: only overlongs
    expect("\xC1\xBF", Kind::IllFormed, 1);
    expect("\xE0\x9F\xBF", Kind::IllFormed, 1);      // overlong: E0 needs A0..BF
    expect("\xED\xA0\x80", Kind::IllFormed, 1);      // a surrogate
    expect("\xF0\x8F\xBF\xBF", Kind::IllFormed, 1);  // overlong: F0 needs 90..BF
    expect("\xF4\x90\x80\x80", Kind::IllFormed, 1);  // above U+10FFFF
    expect("\xF5\x80\x80\x80", Kind::IllFormed, 1);
    expect("\xFF", Kind::IllFormed, 1);
    expect("\xE2\x82" "A", Kind::IllFormed, 2);      // a prefix broken by ASCII
    expect("\xF0\x9F\x98" "A", Kind::IllFormed, 3);
    expect("\xC3\xC3\xA9", Kind::IllFormed, 1);
    expect("\xC3", Kind::Incomplete, 1);             // cut by the end
    expect("\xE2\x82", Kind::Incomplete, 2);
    expect("\xF0\x9F\x98", Kind::Incomplete, 3);
    expect("\xED\xA0", Kind::IllFormed, 1);          // never a prefix of a character
}

TEST(Utf8IsValid, AcceptsWellFormedRejectsTheRest) {
    EXPECT_TRUE(is_valid(""));
    EXPECT_TRUE(is_valid("plain ascii"));
    EXPECT_TRUE(is_valid(std::string_view("nul\0inside", 10)));
    EXPECT_TRUE(is_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"));
    EXPECT_TRUE(is_valid("\xf4\x8f\xbf\xbf"));   // U+10FFFF
    EXPECT_FALSE(is_valid("\xff"));
    EXPECT_FALSE(is_valid("\xc0\x80"));          // overlong NUL
    EXPECT_FALSE(is_valid("\xe0\x80\x80"));      // overlong
    EXPECT_FALSE(is_valid("\xed\xa0\x80"));      // surrogate
    EXPECT_FALSE(is_valid("\xf4\x90\x80\x80"));  // above U+10FFFF
    EXPECT_FALSE(is_valid("\xe2\x82"));          // truncated
    EXPECT_FALSE(is_valid("ok\xe2\x82"));        // truncated at the end only
    EXPECT_FALSE(is_valid("\x80"));              // lone continuation
}

// What Python's "replace" decoder (asciinema's) makes of them.
TEST(Utf8ReplaceInvalid, ReplacesEachMaximalIllFormedSubpartAsPythonDoes) {
    EXPECT_EQ(replace_invalid("a\xff" "b"), "a" + kFFFD + "b");
    EXPECT_EQ(replace_invalid("\xE2\x82" "A"), kFFFD + "A");
    EXPECT_EQ(replace_invalid("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);  // a surrogate
    EXPECT_EQ(replace_invalid("\xC0\xAF"), kFFFD + kFFFD);              // overlong
    EXPECT_EQ(replace_invalid("\xE0\x80\x80"), kFFFD + kFFFD + kFFFD);
    EXPECT_EQ(replace_invalid("\xF4\x90\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD);  // above U+10FFFF
    EXPECT_EQ(replace_invalid("\xF0\x9F\x98"), kFFFD);  // cut short by the end
    EXPECT_EQ(replace_invalid("\x80\x80"), kFFFD + kFFFD);
    EXPECT_EQ(replace_invalid("\xE2\x82\xE2\x82\xAC"), kFFFD + "\xE2\x82\xAC");
    EXPECT_EQ(replace_invalid("\xF5\xFE"), kFFFD + kFFFD);
    EXPECT_EQ(replace_invalid("\xF0\x9F\x98\x80\xE2\x82\xAC"), "\xF0\x9F\x98\x80\xE2\x82\xAC");
}

TEST(Utf8StreamDecoder, PassesWellFormedTextUnchanged) {
    const std::string text = "ascii \x1b[1mbold\x1b[0m \xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\r\n";
    EXPECT_EQ(through({text}), text);
}

TEST(Utf8StreamDecoder, HoldsACharacterCutBetweenCallsUntilItIsWhole) {
    StreamDecoder d;
    EXPECT_EQ(through({"a\xf0\x9f"}, d), "a");
    EXPECT_EQ(d.held(), 2u);
    EXPECT_EQ(through({"\x98"}, d), "");
    EXPECT_EQ(d.held(), 3u);
    EXPECT_EQ(through({"\x80z"}, d), "\xf0\x9f\x98\x80z");
    EXPECT_EQ(d.held(), 0u);
}

// A lead byte ends one piece, ASCII starts the next (the input that overflowed libvterm
// 0.1.4's code point array): one U+FFFD, and the ASCII.
TEST(Utf8StreamDecoder, AnUnfinishedCharacterFollowedByAsciiIsOneReplacement) {
    StreamDecoder d;
    EXPECT_EQ(through({"hello\xf8"}, d), "hello" + kFFFD);  // F8 never starts a character
    EXPECT_EQ(through({"hello\xe2\x82"}, d), "hello");
    EXPECT_EQ(through({"K"}, d), kFFFD + "K");
    EXPECT_EQ(through({"\xe2"}, d), "");
    EXPECT_EQ(through({"\x1b[m"}, d), kFFFD + "\x1b[m");
}

TEST(Utf8StreamDecoder, AHeldPrefixBrokenByTheNextPieceIsReplacedOnce) {
    StreamDecoder d;
    std::string out;
    d.decode(bytes("\xE2"), out);
    d.decode(bytes("\x82"), out);
    EXPECT_EQ(out, "");
    EXPECT_EQ(d.held(), 2u);
    d.decode(bytes("A\xF0"), out);
    EXPECT_EQ(out, kFFFD + "A");
    EXPECT_EQ(d.held(), 1u);
    d.decode(bytes("\xFF"), out);  // neither a continuation nor a start
    EXPECT_EQ(out, kFFFD + "A" + kFFFD + kFFFD);
    EXPECT_EQ(d.held(), 0u);
}

TEST(Utf8StreamDecoder, FlushReplacesWhatIsHeldOnce) {
    StreamDecoder d;
    std::string out;
    d.decode(bytes("x\xF0\x9F\x98"), out);
    d.flush(out);
    EXPECT_EQ(out, "x" + kFFFD);
    EXPECT_EQ(d.held(), 0u);
    d.flush(out);
    EXPECT_EQ(out, "x" + kFFFD);
}

TEST(Utf8StreamDecoder, EveryCutGivesWhatTheWholeGives) {
    const std::string input = "x\xe4\xb8\xad\xf0\x9f\x98\x80\xe2\x82\x41\x80\xc3\xa9\xed\xa0\x80\xf0\x9f";
    const std::string whole = replace_invalid(input);
    EXPECT_EQ(whole, "x\xe4\xb8\xad\xf0\x9f\x98\x80" + kFFFD + "A" + kFFFD + "\xc3\xa9" + kFFFD + kFFFD + kFFFD + kFFFD);
    const std::string_view in(input);
    for (std::size_t cut = 0; cut <= in.size(); ++cut)
        for (std::size_t cut2 = cut; cut2 <= in.size(); ++cut2) {
            StreamDecoder d;
            std::string out = through({in.substr(0, cut), in.substr(cut, cut2 - cut), in.substr(cut2)}, d);
            EXPECT_TRUE(is_valid(out)) << cut << " " << cut2;
            d.flush(out);
            EXPECT_EQ(out, whole) << cut << " " << cut2;
        }
}

}  // namespace
}  // namespace ptyvisor::utf8
