// UTF-8, the one decoder every part of ptyvisor uses: the client checking what it sends, the
// protocol's JSON, recordings, the screen's input to libvterm and the MCP server's text.
//
// Strict, by RFC 3629 and Unicode's table 3-7 of well-formed byte sequences: no overlong
// forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF. Where bytes are ill-formed,
// each "maximal subpart" (Unicode 15, section 3.9: the longest prefix of a well-formed
// sequence, or else one byte) is one unit, replaced by one U+FFFD; this is what Python's
// "replace" decoder and browsers do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ptyvisor::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD, encoded

// What the bytes at the front of a buffer are.
struct Sequence {
    enum class Kind {
        Character,   // a well-formed character of `length` bytes (1..4), `code_point`
        IllFormed,   // a maximal subpart of `length` bytes (1..3) that starts no character
        Incomplete,  // a well-formed prefix of `length` bytes (1..3) that the buffer's end cuts
    };
    Kind kind;
    std::size_t length;
    char32_t code_point = 0;  // Character only
};

// The sequence at the front of `bytes`, which must not be empty.
Sequence next(std::string_view bytes);

// True when all of `text` is well-formed UTF-8.
bool is_valid(std::string_view text);

// `bytes` with each maximal ill-formed subpart, and an incomplete character at the end,
// replaced by U+FFFD: always well-formed.
std::string replace_invalid(std::string_view bytes);

// replace_invalid() over a stream that arrives in pieces cut anywhere: a character cut at the
// end of one piece is held back until the next completes it or shows it ill-formed, so the
// output is the same however the stream was cut.
// Invariant: all that decode() and flush() append is well-formed and ends on a character
// boundary; at most 3 bytes (a well-formed prefix) are held.
class StreamDecoder {
  public:
    // Appends to `out` the text of the held bytes followed by `bytes`, holding back an
    // incomplete character at the end.
    void decode(std::span<const std::uint8_t> bytes, std::string& out);
    // The stream ended: held bytes become one U+FFFD.
    void flush(std::string& out);
    [[nodiscard]] std::size_t held() const { return held_size_; }

  private:
    char held_[4] = {};
    std::size_t held_size_ = 0;
};

}  // namespace ptyvisor::utf8
