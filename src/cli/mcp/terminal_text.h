// Terminal output as text a model can read: escape sequences removed, carriage returns
// resolved, UTF-8 checked. Pure and unit-tested (terminal_text_test.cpp).
//
// The output comes in chunks cut at arbitrary byte offsets (READ's max_bytes), so a chunk may
// end inside an escape sequence, inside a UTF-8 character or between "\r" and "\n". Then the
// conversion stops before that sequence and says so in `consumed`: the caller reads again
// from there, and the sequence arrives whole. Only a sequence longer than kMaxHeldBack (an
// OSC or DCS string that could be megabytes) is consumed across the cut instead, and the
// state it was in comes back in `state`, to be passed to the next call at `consumed`.
//
// Invariants: `text` is valid UTF-8 (an invalid byte becomes U+FFFD); consumed <= bytes.size();
// with `final` (no more bytes will ever follow), consumed == bytes.size().
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ptyvisor::cli::mcp {

// Where the parser is between two chunks. Ground: not inside any sequence.
enum class ParseState {
    Ground,
    Escape,              // after ESC
    EscapeIntermediate,  // ESC, then 0x20..0x2F bytes (e.g. ESC ( B)
    Csi,                 // ESC [ and parameters, until a final byte 0x40..0x7E
    String,              // OSC, DCS, SOS, PM or APC body, until BEL or ESC backslash
    StringEscape,        // an ESC inside a string: a backslash ends it
};

struct TerminalText {
    std::string text;
    std::size_t consumed = 0;               // bytes of the chunk that `text` stands for
    ParseState state = ParseState::Ground;  // the parser's state at `consumed`
};

// The longest sequence held back for the next chunk rather than consumed across the cut.
inline constexpr std::size_t kMaxHeldBack = 4096;

// The readable text of `bytes`, which begin in `state` (Ground at offset 0 and after any
// cut that was held back). `final`: no byte will ever follow (the session has exited and
// this is the end of its log), so nothing is held back.
//
// Removed: CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), DCS/SOS/PM/APC (ESC P/X/^/_ ...
// ST), two- and three-byte ESC sequences (ESC 7, ESC ( B), and control characters other
// than newline and tab. "\r\n" becomes "\n"; a lone "\r" (a progress line being redrawn)
// becomes "\n" too, so that no text is lost; backspace removes nothing (it is dropped).
TerminalText strip_terminal_output(std::string_view bytes, ParseState state, bool final);

// What parse_terminal_output() finds in the output, in order, for a reader that does more
// with it than strip_terminal_output() (condensed_output.h keeps a line model). `at` is the
// index in the chunk where the item begins.
class TerminalEvents {
  public:
    // A character: well-formed UTF-8, or U+FFFD for an ill-formed byte.
    virtual void character(std::string_view utf8, std::size_t at) = 0;
    // A control character other than ESC (newline, "\r", tab, backspace, BEL, DEL...).
    // False to stop before it: the parse ends there, as for a split sequence.
    virtual bool control(char c, std::size_t at) = 0;
    // A CSI sequence read whole in this chunk: its parameter and intermediate bytes and its
    // final byte. One begun in an earlier chunk is not reported.
    virtual void csi(std::string_view parameters, char final_byte, std::size_t at) = 0;
    // A two-byte sequence ESC x (ESC 7, ESC M), read whole in this chunk.
    virtual void escape(char byte, std::size_t at) = 0;

  protected:
    ~TerminalEvents() = default;
};

// The parse strip_terminal_output() makes, reported to `events` instead of made into text
// (the result's `text` stays empty). The same cuts, hold-backs and `state` as there.
TerminalText parse_terminal_output(std::string_view bytes, ParseState state, bool final, TerminalEvents& events);

// `bytes` as they are (escape sequences kept), only cut before a UTF-8 character split at
// the end (unless `final`) and with invalid bytes as U+FFFD, so that the text is valid JSON.
TerminalText raw_terminal_output(std::string_view bytes, bool final);

}  // namespace ptyvisor::cli::mcp
