#include "screen/rep_expander.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

extern "C" {
#include <vterm.h>
}

#include "common/utf8.h"

namespace ptyvisor::screen {
namespace {

using namespace std::string_view_literals;

// What the expander gives libvterm for `in`, cut in pieces of `piece` bytes (0: whole) and
// made whole characters as the emulator does.
std::string expand(std::string_view in, std::size_t max_count = 1000, std::size_t piece = 0) {
    RepExpander rep;
    utf8::StreamDecoder decoder;
    std::string text;
    std::string out;
    const RepExpander::Sink sink = [&](std::string_view part) {
        EXPECT_LE(part.size(), std::max(RepExpander::kChunkBytes, in.size()));
        out += part;
    };
    if (piece == 0) piece = in.size();
    for (std::size_t i = 0; i < in.size(); i += piece) {
        const std::string_view part = in.substr(i, piece);
        text.clear();
        decoder.decode(std::span(reinterpret_cast<const std::uint8_t*>(part.data()), part.size()),
                       text);
        rep.feed(text, max_count, sink);
    }
    return out;
}

TEST(RepExpander, ReplacesTheRepWithCanAndTheCharacters) {
    EXPECT_EQ(expand("ab\x1b[3b!"),
              "ab\x1b[3\x18"
              "bbb!");
    EXPECT_EQ(expand("a\x1b[b"),
              "a\x1b[\x18"
              "a");
    EXPECT_EQ(expand("a\x1b[0;7b"),
              "a\x1b[0;7\x18"
              "a");  // 0 or missing: once
    EXPECT_EQ(expand("e\xcc\x81\x1b[2b"),
              "e\xcc\x81\x1b[2\x18"
              "e\xcc\x81"
              "e\xcc\x81");
    EXPECT_EQ(expand("x\x1b[2b\x1b[2b"), "x\x1b[2\x18xx\x1b[2\x18xx");  // what it printed precedes
}

TEST(RepExpander, LeavesEverythingElseAsItIs) {
    for (const std::string_view s : {"plain text", "\x1b[?3b", "\x1b[>3b", "\x1b[3 b",
                                     "\x1b]0;title b\x07", "\x1bPqb\x1b\\", "\x1b(b",
                                     "b\x1b"
                                     "b",
                                     "\x1b[3;4H\x1b[2J"}) {
        EXPECT_EQ(expand(s), s) << s;
    }
}

// As in xterm, the last character printed, whatever came since.
TEST(RepExpander, RepeatsTheLastCharacterWhateverCameSince) {
    EXPECT_EQ(expand("a\r\x1b[3b"),
              "a\r\x1b[3\x18"
              "aaa");
    EXPECT_EQ(expand("a\x1b[m\x1b[2b"),
              "a\x1b[m\x1b[2\x18"
              "aa");
    EXPECT_EQ(expand("a\x1b]0;t\x07\x1b[2b"),
              "a\x1b]0;t\x07\x1b[2\x18"
              "aa");
    EXPECT_EQ(expand("a\x1b[3\x1b[2b"),
              "a\x1b[3\x1b[2\x18"
              "aa");  // an abandoned sequence
    EXPECT_EQ(expand("a\x1b[3\x18\x1b[2b"),
              "a\x1b[3\x18\x1b[2\x18"
              "aa");  // a cancelled one
    EXPECT_EQ(expand("a\x1b[3\x07"
                     "b"),
              "a\x1b[3\x07\x18"
              "aaa");  // BEL runs inside the CSI
    EXPECT_EQ(expand("a\x00\x7f\x1b[2b"sv),
              "a\x00\x7f\x1b[2\x18"
              "aa"sv);  // dropped by libvterm
}

// A REP with nothing to repeat: the CAN only (the CSI must still end).
TEST(RepExpander, NothingToRepeatBeforeAnyCharacterOrAfterAMarkAlone) {
    EXPECT_EQ(expand("\x1b[5b"), "\x1b[5\x18");
    EXPECT_EQ(expand("\xcc\x81\x1b[5b"), "\xcc\x81\x1b[5\x18");
    EXPECT_EQ(expand("a\r\xcc\x81\x1b[5b"), "a\r\xcc\x81\x1b[5\x18");  // libvterm does not join it
    EXPECT_EQ(expand("a\x1bNq\x1b[5b"), "a\x1bNq\x1b[5\x18");          // shifted in through G2
    EXPECT_EQ(expand("a\xc2\x85\x1b[2b"), "a\x1b[2\x18" "aa");  // a C1 control: dropped
}

TEST(RepExpander, ACsiWithTooManyArgumentsIsCancelledWhole) {
    const std::string fifteen_separators = "\x1b[0;0;0;0;0;0;0;0;0;0;0;0;0;0;0;1m";
    EXPECT_EQ(expand(fifteen_separators), fifteen_separators);
    // The 16th separator becomes CAN; the rest of the CSI goes, a control in it still runs.
    EXPECT_EQ(expand("\x1b[0;0;0;0;0;0;0;0;0;0;0;0;0;0;0;0;1mx"),
              "\x1b[0;0;0;0;0;0;0;0;0;0;0;0;0;0;0;0\x18x");
    EXPECT_EQ(expand("\x1b[0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:7\r 5x"),
              "\x1b[0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0\x18\rx");
    EXPECT_EQ(expand("\x1b[;;;;;;;;;;;;;;;;;;;\x1b[2b"), "\x1b[;;;;;;;;;;;;;;;\x18\x1b[2\x18");
    EXPECT_EQ(expand("\x1b[;;;;;;;;;;;;;;;;;?5x"),
              "\x1b[;;;;;;;;;;;;;;;\x18"
              "5x");  // '?' ends it, eaten
}

TEST(RepExpander, TheCountIsCappedAndTheOutputComesInBoundedWrites) {
    const std::string out = expand("x\x1b[99999999999999999999b", 300000);
    EXPECT_EQ(out.size(), 1 + 23 + 300000u);
    EXPECT_EQ(out.find_first_not_of('x', 24), std::string::npos);
}

// However the stream is cut, libvterm is given the same bytes (the CAN included), so a REP
// split between writes is still caught.
TEST(RepExpander, TheSameWhereverTheStreamIsCut) {
    const std::string_view pieces[] = {"ab",     "\xe7\x95\x8c", "e\xcc\x81", "\x1b[",   "3",
                                       "b",      "\x1b[b",       "\r\n",      "\x1b]0;", "\x07",
                                       "\x1b\\", "\x1b(0",       "q",         "\x1b[?",  ";",
                                       "7 ",     "\x18",         "\x1bN",     "\xc2\x85"};
    std::mt19937 random(7);
    for (int round = 0; round < 200; ++round) {
        std::string in;
        for (int i = 0; i < 30; ++i) in += pieces[random() % std::size(pieces)];
        const std::string whole = expand(in);
        for (std::size_t piece = 1; piece < 5; ++piece)
            ASSERT_EQ(expand(in, 1000, piece), whole) << in;
    }
}

// The invariant, checked with libvterm's own parser: over random streams dense in what makes
// and breaks sequences, cut at random points, the parser dispatches no REP from what the
// expander gives it (while the same streams unexpanded do have REPs).
struct RepCount {
    int reps = 0;
    static int text(const char bytes[], std::size_t len, void*) {
        std::size_t n = 0;  // libvterm's text run ends at a C0 control or DEL
        while (n < len && static_cast<unsigned char>(bytes[n]) >= 0x20 && bytes[n] != 0x7f) ++n;
        return static_cast<int>(n == 0 ? 1 : n);
    }
    static int csi(const char* leader, const long[], int argcount, const char* intermed,
                   char command, void* user) {
        EXPECT_LE(argcount, static_cast<int>(RepExpander::kMaxCsiArguments));
        if (command == 'b' && !(leader && leader[0]) && !(intermed && intermed[0]))
            ++static_cast<RepCount*>(user)->reps;
        return 1;
    }
};

int reps_libvterm_parses(const std::vector<std::string>& writes) {
    static const VTermParserCallbacks callbacks = {
        &RepCount::text, nullptr, nullptr, &RepCount::csi, nullptr, nullptr, nullptr};
    VTerm* vt = vterm_new(3, 20);
    vterm_set_utf8(vt, 1);
    RepCount count;
    vterm_parser_set_callbacks(vt, &callbacks, &count);
    for (const std::string& w : writes) vterm_input_write(vt, w.data(), w.size());
    vterm_free(vt);
    return count.reps;
}

TEST(RepExpander, LibvtermsParserIsGivenNoRep) {
    const std::string_view pieces[] = {
        "\x1b",     "[",        "b",    "3",     ";",     ":",     "?",
        ">",        " ",        "!",    "\x07",  "\x18",  "\x1a",  "]",
        "P",        "\\",       "\x00", "\x7f",  "\r",    "x",     "\xe7\x95\x8c",
        "\xcc\x81", "\xc2\x9b", "\xff", "N",     "\x1b[", "\x1b[", "\x1b[",
        "\x1b[2",   "b",        "b",    "\x1b[b"};
    std::mt19937 random(11);
    int reps_before = 0;
    for (int round = 0; round < 500; ++round) {
        std::string in;
        for (int i = 0; i < 60; ++i) in += pieces[random() % std::size(pieces)];
        std::vector<std::string> raw, expanded;
        RepExpander rep;
        utf8::StreamDecoder decoder;
        for (std::size_t i = 0; i < in.size();) {
            const std::size_t n = 1 + random() % 7;
            const std::string_view part = std::string_view(in).substr(i, n);
            i += part.size();
            std::string text;
            decoder.decode(
                std::span(reinterpret_cast<const std::uint8_t*>(part.data()), part.size()), text);
            raw.push_back(text);
            rep.feed(text, 20, [&](std::string_view out) { expanded.emplace_back(out); });
        }
        reps_before += reps_libvterm_parses(raw);
        ASSERT_EQ(reps_libvterm_parses(expanded), 0) << in;
    }
    EXPECT_GT(reps_before, 100);  // the streams are worth checking
}

}  // namespace
}  // namespace ptyvisor::screen
