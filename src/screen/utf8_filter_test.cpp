#include "screen/utf8_filter.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace ptyvisor::screen {
namespace {

// Each chunk through one filter, in order; the concatenated output.
std::string through(std::initializer_list<std::string_view> chunks, Utf8Filter* keep = nullptr) {
    Utf8Filter local;
    Utf8Filter& f = keep ? *keep : local;
    std::string out;
    for (auto c : chunks) f.filter(std::span(reinterpret_cast<const std::uint8_t*>(c.data()), c.size()), out);
    return out;
}

const std::string kFffd = "\xef\xbf\xbd";

TEST(Utf8Filter, PassesWellFormedTextUnchanged) {
    const std::string text = "ascii \x1b[1mbold\x1b[0m \xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\r\n";
    EXPECT_EQ(through({text}), text);
}

TEST(Utf8Filter, HoldsACharacterCutBetweenCallsUntilItIsWhole) {
    Utf8Filter f;
    EXPECT_EQ(through({"a\xf0\x9f"}, &f), "a");
    EXPECT_EQ(f.held(), 2u);
    EXPECT_EQ(through({"\x98"}, &f), "");
    EXPECT_EQ(through({"\x80z"}, &f), "\xf0\x9f\x98\x80z");
    EXPECT_EQ(f.held(), 0u);
}

// The input that overflowed libvterm 0.1.4's code point array: a lead byte ends one write,
// ASCII starts the next. libvterm must never see the unfinished character.
TEST(Utf8Filter, AnUnfinishedCharacterFollowedByAsciiIsOneReplacement) {
    Utf8Filter f;
    EXPECT_EQ(through({"hello\xf8"}, &f), "hello" + kFffd);  // F8 never starts a character
    EXPECT_EQ(through({"hello\xe2\x82"}, &f), "hello");
    EXPECT_EQ(through({"K"}, &f), kFffd + "K");
    EXPECT_EQ(through({"\xe2"}, &f), "");
    EXPECT_EQ(through({"\x1b[m"}, &f), kFffd + "\x1b[m");
}

TEST(Utf8Filter, IllFormedBytesBecomeOneReplacementPerMaximalSubpart) {
    EXPECT_EQ(through({"\x80"}), kFffd);                           // a lone continuation
    EXPECT_EQ(through({"\xc0\xaf"}), kFffd + kFffd);                // overlong lead, then continuation
    EXPECT_EQ(through({"\xe0\x80\x80"}), kFffd + kFffd + kFffd);    // overlong: E0 needs A0..BF
    EXPECT_EQ(through({"\xed\xa0\x80"}), kFffd + kFffd + kFffd);    // a surrogate
    EXPECT_EQ(through({"\xf4\x90\x80\x80"}), kFffd + kFffd + kFffd + kFffd);  // beyond U+10FFFF
    EXPECT_EQ(through({"\xe2\x82x"}), kFffd + "x");                 // cut short: one for E2 82
    EXPECT_EQ(through({"\xf5\xff"}), kFffd + kFffd);
}

TEST(Utf8Filter, OutputIsAlwaysWellFormedWhateverTheChunking) {
    // Every split of a mixed input gives the same output as the whole.
    const std::string input = "x\xe4\xb8\xad\xf0\x9f\x98\x80\xe2\x82\x41\x80\xc3\xa9\xf0\x9f";
    const std::string whole = through({input}) + through({});
    for (std::size_t cut = 0; cut <= input.size(); ++cut) {
        Utf8Filter f;
        const std::string a = through({std::string_view(input).substr(0, cut)}, &f);
        const std::string b = through({std::string_view(input).substr(cut)}, &f);
        EXPECT_EQ(a + b, through({input})) << "cut at " << cut;
    }
    EXPECT_EQ(whole, "x\xe4\xb8\xad\xf0\x9f\x98\x80" + kFffd + "A" + kFffd + "\xc3\xa9");
}

}  // namespace
}  // namespace ptyvisor::screen
