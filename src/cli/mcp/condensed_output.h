// Terminal output sized for a model: a range of a session's log made into the lines the
// terminal finally showed, then fitted into a budget of bytes. Pure and unit-tested
// (condensed_output_test.cpp); terminal_read uses it, and so can any tool that returns a
// command's output.
//
// The lines: escape sequences are removed (terminal_text.h parses them) and the ones that
// move the cursor within recent lines are followed, as a terminal would: "\r" returns to the
// line's start and what follows overwrites it ("50%\r100%" shows "100%", "hello\rj" shows
// "jello"), backspace steps back, ESC[K / ESC[1K / ESC[2K erase, ESC[nA / ESC[nF / ESC M go
// up (a redrawn progress block), ESC[nB / ESC[nE down, ESC[nC / ESC[nD / ESC[nG sideways,
// ESC 7 / ESC 8 save and restore, ESC[J erases below. Only the last kLiveRows lines can be
// reached so; older ones are final. Positioning by absolute row (ESC[H) and clearing the
// screen are ignored: a full-screen program reads better through terminal_screen. But what
// is drawn at an absolute position between a save and its restore (apt's progress bar on
// the bottom row) is left out: it is not in the stream of lines. A line longer than
// kMaxColumns wraps, as on a terminal that wide. Trailing blanks are trimmed.
// With keep_escapes the bytes stay as they are (invalid UTF-8 made U+FFFD) and only "\n"
// ends a line.
//
// The budget: when the text is longer, the result is its first lines (up to 40% of the
// budget), one marker line, and its last lines, the whole at most `budget` bytes (unless the
// marker alone is longer). The marker says how many bytes of text, and of the log, were left
// out, and the log offsets to read them from ("read them with terminal_read offset=F to=T"). Offsets map back through each line's start in
// the log (the byte after the newline that began it); a line redrawn from below keeps the
// start it had. With `in_order` nothing is left out: the result is the first lines that fit,
// and consumed_to is where the first line that did not fit begins (lines wrap at a quarter
// of the budget, so that one always fits).
//
// Memory: the lines that fit the budget, plus kLiveRows lines of at most kMaxColumns
// characters, plus a held-back escape sequence (at most kMaxHeldBack): never the whole log
// (with budget 0, the whole text).
//
// Invariants: `text` is valid UTF-8; when truncated, raw_offset <= omitted_from <=
// omitted_to <= consumed_to, else all three omitted_ fields are 0; consumed_to is the end of
// what was fed unless finish()'s Ending held something back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cli/mcp/terminal_text.h"

namespace ptyvisor::cli::mcp {

struct CondenseOptions {
    std::size_t budget = 16 * 1024;  // most bytes of text; 0: no limit
    bool keep_escapes = false;       // the bytes as they are: only the budget applies
    bool in_order = false;           // a page: the first lines that fit, none left out
    // The parser's state at the first byte (Ground unless a read stopped inside a long string).
    ParseState state = ParseState::Ground;
};

struct CondensedOutput {
    std::string text;
    bool truncated = false;            // a marker line stands for lines left out
    std::uint64_t omitted_bytes = 0;   // bytes of text left out
    std::uint64_t omitted_from = 0;    // the log offsets of the lines left out: [from, to)
    std::uint64_t omitted_to = 0;
    std::uint64_t consumed_to = 0;     // the log offset the text accounts for up to
    ParseState state = ParseState::Ground;  // the parser's state at consumed_to
};

// How the bytes fed so far end.
enum class Ending {
    Final,   // nothing will ever follow (the session has exited, this is its log's end)
    ForNow,  // more may come later: a sequence or character split at the end is held back
    Cut,     // more follows already (the range was cut short): the unfinished last line is
             // held back too, unless it is the only one, for the next read to have it whole
};

// The lines that can still be redrawn by moving the cursor up.
inline constexpr std::size_t kLiveRows = 32;
// The widest line; a longer one wraps.
inline constexpr std::size_t kMaxColumns = 16 * 1024;
// The characters of a line: with `in_order`, at most what a quarter of the budget holds.
std::size_t line_width(const CondenseOptions& options);

// The condensed text of a stream fed in pieces. The pieces follow each other in the log
// from `raw_offset`; each may be cut anywhere.
class Condenser {
  public:
    Condenser(std::uint64_t raw_offset, const CondenseOptions& options);
    ~Condenser();
    Condenser(const Condenser&) = delete;
    Condenser& operator=(const Condenser&) = delete;

    // What turns bytes into lines (one class for each of keep_escapes' ways) and what fits
    // the lines into the budget; condensed_output.cpp.
    class Lines;
    class Budget;

    // The bytes that follow the last piece.
    void feed(std::string_view piece);
    // The result, once; what is held back (see Ending) is left out of the text, and
    // consumed_to stops before it.
    CondensedOutput finish(Ending ending);
    // The log offset parsed up to: less than fed when a split sequence waits for more.
    [[nodiscard]] std::uint64_t parsed_to() const { return next_offset_; }

  private:
    CondenseOptions options_;
    std::uint64_t next_offset_;  // of held_'s first byte
    std::string held_;           // bytes the parser held back, to parse with the next piece
    ParseState state_;
    std::unique_ptr<Budget> budget_;
    std::unique_ptr<Lines> lines_;
};

// `raw`, the log from `raw_offset`, condensed whole (Ending::Final: nothing is held back).
CondensedOutput condense(std::string_view raw, std::uint64_t raw_offset, const CondenseOptions& options);

}  // namespace ptyvisor::cli::mcp
