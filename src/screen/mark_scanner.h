// MarkScanner: finds a shell's OSC 133 and OSC 7 marks (server/shell_mark.h) in a session's
// output, as raw log bytes, with their exact log offsets however the output is cut.
//
// The marks read:
//   ESC ] 133 ; A ...                          Prompt
//   ESC ] 133 ; B ...                          CommandInput
//   ESC ] 133 ; C [; cmdline_url=PCT] ...      OutputStart; the command line, percent-decoded
//   ESC ] 133 ; D [; N] ...                    CommandEnd; exit code N when it is 0..255
//   ESC ] 7 ; file://HOST/PATH                 Cwd; PATH percent-decoded, the host ignored
//   ESC ] 633 ; E ; CMDLINE [; NONCE]          (VS Code) the command line of the next C that
//                                              names none; `\\` and `\xHH` unescaped
// each ended by BEL or ST (ESC \); other `;key=value` parameters are ignored. Percent-decoding
// is the URL standard's: a `%` not followed by two hex digits stays as it is. A text that is
// not valid UTF-8 once decoded is empty; one longer than ShellMark::kMaxText is cut at a
// character boundary.
//
// Where an OSC starts and ends is read as libvterm 0.1.4's parser reads it (its parser.c), so
// that the marks are the OSCs the screen saw: ESC ] starts one (also inside a string, and
// after an escape's intermediate bytes); BEL or ESC \ ends it; CAN, SUB, or ESC followed by
// a printable byte other than `\` abandons it; NUL, DEL and other C0 controls inside it (also
// between that ESC and its next byte) are not part of it.
// 0x9D and 0x9C are not OSC and ST: libvterm runs in UTF-8 mode, where C1 bytes are text. The
// UTF-8 filter in front of libvterm (emulator.h) changes only bytes >= 0x80, so both see the
// same sequences. libvterm's own OSC callback is not used: it sees the filtered bytes, whose
// offsets are not the log's, and keeps only 64 bytes of a string that two writes cut.
//
// Invariants: at most kMaxPayload bytes of an OSC are held (the rest of a longer one is
// dropped: its text is cut anyway); marks come out in log order, and so in offset order.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/shell_mark.h"

namespace ptyvisor::screen {

class MarkScanner {
  public:
    // Enough for a kMaxText command line written as \xHH escapes, and its parameters.
    static constexpr std::size_t kMaxPayload = 4 * server::ShellMark::kMaxText + 64;

    // Scans the log's bytes [offset, offset + bytes.size()), appending the marks they end to
    // `marks`. A scan that does not start where the previous one ended (bytes were lost)
    // forgets the sequence the previous one left unfinished.
    void scan(std::span<const std::uint8_t> bytes, std::uint64_t offset, std::vector<server::ShellMark>& marks);

  private:
    enum class State : std::uint8_t {
        Ground,     // no escape sequence that could become an OSC
        Escape,     // after ESC (and any intermediate bytes), outside an OSC
        Osc,        // inside an OSC
        OscEscape,  // after ESC inside an OSC
    };
    void reset();
    void start_osc();
    void append(std::uint8_t c);
    // The OSC that started at osc_start_ ended just before `end`.
    void finish(std::uint64_t end, std::vector<server::ShellMark>& marks);

    State state_ = State::Ground;
    std::uint64_t next_ = 0;       // the offset the next scan continues at
    std::uint64_t escape_at_ = 0;  // the offset of the last ESC
    std::uint64_t osc_start_ = 0;  // the offset of the current OSC's ESC
    std::string payload_;          // the current OSC's bytes after ESC ], up to kMaxPayload
    bool wanted_ = false;          // whether the current OSC may be a mark (else not kept)
    bool truncated_ = false;       // whether payload_ lost bytes past kMaxPayload
    std::optional<std::string> next_command_line_;  // from OSC 633;E, for the next C
};

// The parts of the scanner that are functions, for tests.
// `text` with each %HH replaced by its byte (a `%` not followed by two hex digits is kept).
std::string percent_decode(std::string_view text);
// `text` with VS Code's escapes (`\\`, `\xHH`) replaced; other backslashes kept.
std::string vscode_unescape(std::string_view text);
// `text` if it is valid UTF-8, cut at a character boundary to ShellMark::kMaxText; else
// empty. `cut_short`: the text's end was lost, so an unfinished character there is dropped.
std::string mark_text(std::string text, bool cut_short = false);

}  // namespace ptyvisor::screen
