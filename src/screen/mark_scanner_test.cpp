#include "screen/mark_scanner.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ptyvisor::screen {
namespace {

using server::ShellMark;
using Kind = ShellMark::Kind;

std::span<const std::uint8_t> bytes_of(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// The marks of `output`, scanned in one piece from `offset`.
std::vector<ShellMark> scan(std::string_view output, std::uint64_t offset = 0) {
    MarkScanner scanner;
    std::vector<ShellMark> marks;
    scanner.scan(bytes_of(output), offset, marks);
    return marks;
}

// One mark expected: its kind, offset, exit code and text.
void expect_mark(const ShellMark& m, Kind kind, std::uint64_t offset, std::optional<int> exit_code = {},
                 const std::string& text = {}) {
    EXPECT_EQ(m.kind, kind);
    EXPECT_EQ(m.offset, offset);
    EXPECT_EQ(m.exit_code, exit_code);
    EXPECT_EQ(m.text, text);
}

bool same(const std::vector<ShellMark>& a, const std::vector<ShellMark>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].kind != b[i].kind || a[i].offset != b[i].offset || a[i].exit_code != b[i].exit_code ||
            a[i].text != b[i].text)
            return false;
    return true;
}

// A prompt, a command and its output, as a shell with OSC 133 integration writes them, mixing
// BEL and ST terminators, colours, a title and a hyperlink (OSCs that are not marks), and the
// marks expected in it, from `base` on.
struct Sample {
    std::string output;
    std::vector<ShellMark> marks;
};

Sample session_sample(std::uint64_t base = 0) {
    Sample s;
    const auto mark_here = [&](Kind kind, std::optional<int> exit_code = {}, std::string text = {}) {
        s.marks.push_back({kind, base + s.output.size(), exit_code, std::move(text)});
    };
    s.output += "\x1b]0;title\x07";
    s.output += "\x1b]7;file://host/home/me\x1b\\";
    mark_here(Kind::Cwd, {}, "/home/me");
    s.output += "\x1b]133;A\x07";
    mark_here(Kind::Prompt);
    s.output += "\x1b[1;32m$\x1b[0m ";
    s.output += "\x1b]133;B\x1b\\";
    mark_here(Kind::CommandInput);
    s.output += "ls -l\r\n";
    s.output += "\x1b]133;C;cmdline_url=ls%20-l\x07";
    mark_here(Kind::OutputStart, {}, "ls -l");
    s.output += "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\r\n";
    mark_here(Kind::CommandEnd, 2);  // at its first byte
    s.output += "\x1b]133;D;2\x1b\\";
    return s;
}

TEST(MarkScanner, FindsEachKindAtItsOffset) {
    const Sample sample = session_sample();
    ASSERT_EQ(sample.output.size(), 139u);
    const auto marks = scan(sample.output);
    EXPECT_TRUE(same(marks, sample.marks));
    ASSERT_EQ(marks.size(), 5u);
    expect_mark(marks[0], Kind::Cwd, 35, {}, "/home/me");
    expect_mark(marks[1], Kind::Prompt, 43);
    expect_mark(marks[4], Kind::CommandEnd, 128, 2);
    // Offsets are the log's.
    EXPECT_TRUE(same(scan(sample.output, 1'000'000'007), session_sample(1'000'000'007).marks));
}

TEST(MarkScanner, OffsetsDoNotDependOnHowTheOutputIsCut) {
    const Sample sample = session_sample();
    const std::string_view output = sample.output;
    for (std::size_t cut = 0; cut <= output.size(); ++cut) {
        SCOPED_TRACE(cut);
        MarkScanner scanner;
        std::vector<ShellMark> marks;
        scanner.scan(bytes_of(output.substr(0, cut)), 0, marks);
        scanner.scan(bytes_of(output.substr(cut)), cut, marks);
        EXPECT_TRUE(same(marks, sample.marks));
    }
    // And one byte at a time.
    MarkScanner scanner;
    std::vector<ShellMark> marks;
    for (std::size_t i = 0; i < output.size(); ++i) scanner.scan(bytes_of(output.substr(i, 1)), i, marks);
    EXPECT_TRUE(same(marks, sample.marks));
}

TEST(MarkScanner, CommandEndWithoutAValidStatusHasNone) {
    for (const std::string status : {"", ";", ";256", ";-1", ";abc", ";1000", ";12x"}) {
        SCOPED_TRACE(status);
        const auto marks = scan("\x1b]133;D" + status + "\x07");
        ASSERT_EQ(marks.size(), 1u);
        expect_mark(marks[0], Kind::CommandEnd, 0);
    }
    const auto marks = scan("xy\x1b]133;D;255;aid=7\x07");
    ASSERT_EQ(marks.size(), 1u);
    expect_mark(marks[0], Kind::CommandEnd, 2, 255);
}

TEST(MarkScanner, CommandLinesArePercentDecoded) {
    const auto marks = scan(
        "\x1b]133;C;aid=3;cmdline_url=echo%20%22a%3Bb%22%20%C3%A9\x07"
        "\x1b]133;C\x07"
        "\x1b]133;C;cmdline_url=%zz%4%\x07"    // bad escapes stay as they are
        "\x1b]133;C;cmdline_url=%ff%C3\x07");  // not UTF-8 once decoded: empty
    ASSERT_EQ(marks.size(), 4u);
    EXPECT_EQ(marks[0].text, "echo \"a;b\" \xc3\xa9");
    EXPECT_EQ(marks[1].text, "");
    EXPECT_EQ(marks[2].text, "%zz%4%");
    EXPECT_EQ(marks[3].text, "");
    EXPECT_EQ(percent_decode("%41%4a%4A%"), "AJJ%");
}

TEST(MarkScanner, TheWorkingDirectoryIsTheUrlsPath) {
    const auto marks = scan(
        "\x1b]7;file://host.example/tmp/a%20b\x07"
        "\x1b]7;file:///root\x07"
        "\x1b]7;file://host-only\x07"       // no path: not a mark
        "\x1b]7;http://host/x\x07"          // not a file URL
        "\x1b]7;file://h/%80\x07");         // not UTF-8 once decoded: empty
    ASSERT_EQ(marks.size(), 3u);
    EXPECT_EQ(marks[0].text, "/tmp/a b");
    EXPECT_EQ(marks[1].text, "/root");
    EXPECT_EQ(marks[2].kind, Kind::Cwd);
    EXPECT_EQ(marks[2].text, "");
}

TEST(MarkScanner, LongTextsAreCutAtACharacterBoundary) {
    // "a" then two-byte characters: kMaxText (even) falls inside one, which is dropped.
    std::string line = "a";
    for (int i = 0; i < 1500; ++i) line += "%C3%A9";
    auto marks = scan("\x1b]133;C;cmdline_url=" + line + "\x07");
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_EQ(marks[0].text.size(), ShellMark::kMaxText - 1);
    EXPECT_EQ(marks[0].text.substr(0, 3), "a\xc3\xa9");
    // Longer than the scanner holds, written raw: still a mark, its text cut, still UTF-8.
    std::string raw = "b";
    for (std::size_t i = 0; i < MarkScanner::kMaxPayload; ++i) raw += "\xc3\xa9";
    marks = scan("\x1b]133;C;cmdline_url=" + raw + "\x1b\\");
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_EQ(marks[0].offset, 20 + raw.size() + 2);
    EXPECT_EQ(marks[0].text.size(), ShellMark::kMaxText - 1);
    EXPECT_EQ(mark_text(std::string(ShellMark::kMaxText + 10, 'x')).size(), ShellMark::kMaxText);
    EXPECT_EQ(mark_text("ok\xc3", true), "ok");  // cut short: the unfinished character goes
    EXPECT_EQ(mark_text("ok\xc3"), "");
}

TEST(MarkScanner, TakesVsCodesCommandLineForTheNextCommand) {
    const auto marks = scan(
        "\x1b]633;E;echo \\x3b\\\\ \\q;nonce\x07\x1b]133;C\x07"      // E, then C without a line
        "\x1b]633;E;ignored\x07\x1b]133;C;cmdline_url=own\x07"       // C's own line wins
        "\x1b]633;E;stale\x07\x1b]133;A\x07\x1b]133;C\x07");         // a prompt forgets E
    ASSERT_EQ(marks.size(), 4u);
    EXPECT_EQ(marks[0].text, "echo ;\\ \\q");
    EXPECT_EQ(marks[1].text, "own");
    EXPECT_EQ(marks[2].kind, Kind::Prompt);
    EXPECT_EQ(marks[3].text, "");
}

TEST(MarkScanner, IgnoresWhatIsNotAMark) {
    EXPECT_TRUE(scan("\x1b]133;AB\x07"        // not A
                     "\x1b]133;Z\x07"         // no such mark
                     "\x1b]1337;A\x07"        // another OSC
                     "\x1b]133;A\x18\x07"     // CAN abandons it
                     "\x1b]133;A\x1a\x07"     // so does SUB
                     "\x1b]133;A\x1bx\x07"    // and ESC followed by anything but a backslash
                     "\x9d" "133;A\x9c"       // C1 forms are text in UTF-8
                     "\xc2\x9d" "133;A\x07"   // as are encoded ones
                     "133;A\x07 ]133;A\x07"   // no ESC
                     "\x1b[133;A\x07")        // a CSI
                    .empty());
}

TEST(MarkScanner, ReadsOscsAsLibvtermDoes) {
    // Controls inside are not part of the OSC; an ESC ] inside one starts another; an escape's
    // intermediate bytes do not stop ESC ] from starting one.
    const auto marks = scan(
        "\x1b]13\r3;A\x07"                 // 0..9
        "\x1b]0;t\x1b]133;D\x1b\\"          // the D starts at 14
        "\x1b ]133;B\x07"                   // 23..32
        "\x1b]133;\x1b\x07" "A\x1b\\"       // ESC then a control: still after ESC in the OSC
        "\x1b]133;\x1b\\");                 // ends; an empty kind is no mark
    ASSERT_EQ(marks.size(), 3u);
    expect_mark(marks[0], Kind::Prompt, 9);
    expect_mark(marks[1], Kind::CommandEnd, 14);
    expect_mark(marks[2], Kind::CommandInput, 32);
}

TEST(MarkScanner, BytesLostBetweenScansEndTheOscInProgress) {
    MarkScanner scanner;
    std::vector<ShellMark> marks;
    scanner.scan(bytes_of("\x1b]133;"), 0, marks);
    scanner.scan(bytes_of("A\x07"), 100, marks);  // not where the previous scan ended
    scanner.scan(bytes_of("\x1b]133;B\x07"), 102, marks);
    ASSERT_EQ(marks.size(), 1u);
    expect_mark(marks[0], Kind::CommandInput, 110);
}

}  // namespace
}  // namespace ptyvisor::screen
