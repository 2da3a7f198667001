#include "screen/alt_screen_watch.h"

#include <gtest/gtest.h>

#include <string>

#include "screen/emulator.h"

namespace ptyvisor::screen {
namespace {

bool switches(std::string_view bytes) { return AltScreenWatch().scan(bytes); }

TEST(AltScreenWatch, SeesEveryFormOfTheSwitch) {
    EXPECT_TRUE(switches("\x1b[?1049h"));
    EXPECT_TRUE(switches("\x1b[?1047h"));
    EXPECT_TRUE(switches("\x1b[?47h"));
    EXPECT_TRUE(switches("\x1b[?1;1049h"));
    EXPECT_TRUE(switches("\x1b[?1049;25h"));
    EXPECT_TRUE(switches("\x1b[?0047h"));     // leading zeros
    EXPECT_TRUE(switches("\x1b[?001049h"));   // more digits than any of them
    EXPECT_TRUE(switches("\x1b[?99999999999999999999h"));  // a number libvterm would wrap
    EXPECT_TRUE(switches("text\x1b[?10\n49h"));  // a control inside the sequence is run, not an end
    EXPECT_TRUE(switches("\x1b[?10\x7f" "49h"));    // DEL is dropped
    EXPECT_TRUE(switches("\x1b(\x1b[?1049h"));
    EXPECT_TRUE(switches("\x1b([?1049h"));         // after an intermediate, ESC [ is still a CSI
}

TEST(AltScreenWatch, CarriesItsStateAcrossWrites) {
    AltScreenWatch w;
    EXPECT_FALSE(w.scan("abc\x1b"));
    EXPECT_FALSE(w.scan("[?10"));
    EXPECT_TRUE(w.scan("49h"));
}

TEST(AltScreenWatch, AnEscapeStartsOverSoNothingHidesASwitch) {
    EXPECT_TRUE(switches("\x1b[?12\x1b[?1049h"));
    EXPECT_TRUE(switches("\x1b]0;title\x1b[?1049h"));
}

TEST(AltScreenWatch, OtherSequencesAreNotASwitch) {
    EXPECT_FALSE(switches("\x1b[47m"));        // SGR: white background
    EXPECT_FALSE(switches("\x1b[1047h"));      // an ANSI mode, not a DEC one
    EXPECT_FALSE(switches("\x1b[?25l\x1b[?1h"));
    EXPECT_FALSE(switches("?1049h"));           // text
    EXPECT_FALSE(switches("\x1b[?1048h"));
    EXPECT_FALSE(switches("\x1b[?10\x18" "49h"));  // CAN ends it
}

TEST(Emulator, MakesTheAlternateScreenOnlyWhenAProgramMaySwitch) {
    Emulator e(20, 3, 10);
    const std::string plain = "\x1b[47mprompt$ \x1b[m";
    e.feed({reinterpret_cast<const std::uint8_t*>(plain.data()), plain.size()});
    EXPECT_FALSE(e.has_alternate_cells());
    // Switched with a pen set: the alternate screen made late is still blank and plain.
    const std::string on = "\x1b[1;41m\x1b[?10";
    e.feed({reinterpret_cast<const std::uint8_t*>(on.data()), on.size()});
    const std::string rest = "49hX";
    e.feed({reinterpret_cast<const std::uint8_t*>(rest.data()), rest.size()});
    EXPECT_TRUE(e.has_alternate_cells());
    const auto s = e.snapshot(0, true);
    EXPECT_TRUE(s.alternate);
    EXPECT_EQ(s.lines, (std::vector<std::string>{"        X", "", ""}));  // 1049 keeps the cursor
    Emulator reference(20, 3, 10);
    const std::string all = plain + on + rest;
    reference.feed({reinterpret_cast<const std::uint8_t*>(all.data()), all.size()});
    EXPECT_EQ(reference.snapshot(0, true), s);
}

}  // namespace
}  // namespace ptyvisor::screen
