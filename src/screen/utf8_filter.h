// What libvterm is fed: well-formed UTF-8 only, in whole characters.
//
// libvterm 0.1.4 (Debian 12's) decodes UTF-8 into an array of one code point per input
// byte. A character left unfinished by one write, then followed by ASCII in the next, makes
// it store two code points for one byte (U+FFFD, then the letter): one past the array, on
// the stack (found by fuzz_screen against an instrumented build of that libvterm). The filter
// keeps that state out of libvterm: each ill-formed subsequence becomes one U+FFFD (the
// "maximal subpart" practice of Unicode 15, section 3.9), and a character cut at the end of
// one call is held back until the next completes it or shows it ill-formed.
//
// Invariant: everything appended to `out` is well-formed UTF-8 ending on a character boundary.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace ptyvisor::screen {

class Utf8Filter {
  public:
    // Appends to `out` the well-formed text of what was held back plus `in`.
    void filter(std::span<const std::uint8_t> in, std::string& out);
    // Bytes of an unfinished character held back for the next call (0..3).
    [[nodiscard]] std::size_t held() const { return held_size_; }

  private:
    std::array<std::uint8_t, 4> held_{};
    std::size_t held_size_ = 0;
};

}  // namespace ptyvisor::screen
