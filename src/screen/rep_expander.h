// RepExpander: REP (CSI Ps b, "repeat the preceding graphic character", ECMA-48 8.3.103)
// turned into the characters it stands for, before libvterm sees the bytes.
//
// libvterm 0.1.4's own REP writes past the row when the character is wide and the repeat
// reaches the last column (20 columns, U+754C, CSI ?7l, CSI 20G, CSI 3b: a segfault of the
// screen worker), and loops for ever when the character has no width (a combining mark
// printed alone). Printed characters take libvterm's ordinary text path, which has neither
// fault. So libvterm is never given a REP: its final byte is replaced by CAN, which ends the
// sequence without effect, followed by the character printed `count` times.
//
// Invariants:
// - follows libvterm 0.1.4's parser (src/parser.c) byte for byte, over the same stream: so
//   every byte it would run as a REP (a CSI with no leader, no intermediate, final 'b') is
//   replaced, wherever writes cut the sequence, and nothing else is changed;
// - the character repeated is the last one printed, whatever controls and sequences came
//   since, as xterm (charproc.c: REP repeats `lastchar`, which only printing sets) and libvterm
//   do; before any, a REP prints nothing (as xterm; libvterm looped for ever);
// - a character is a base and the combining marks libvterm joins to it (libvterm_combining.h),
//   cut to kMaxCodePoints code points, as a libvterm cell keeps them; a character shifted in by
//   SS2/SS3, an ill-formed byte, a lone combining mark and a base followed by
//   more marks than `recent_` holds are not repeated;
// - a REP prints at most `max_count` characters (the emulator gives its columns), so what a
//   REP costs is bounded whatever its parameter.
// - a CSI with more arguments than libvterm's array holds (kMaxCsiArguments) is cancelled
//   whole: CAN in place of the separator that would overflow it, and the rest of the sequence
//   dropped. libvterm 0.1.4's parser counts separators without a bound and writes past
//   `csi_args` (into its own callback pointers): 17 arguments crashed the worker. It is the
//   same parser state, so the same class guards it.
// - a C1 control encoded in UTF-8 (U+0080..U+009F) is dropped: libvterm prints it as a
//   character of width -1, which puts the cursor at column -1 (then an insert segfaults).
// Input must be whole UTF-8 characters (the emulator's StreamDecoder gives that).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace ptyvisor::screen {

class RepExpander {
  public:
    static constexpr std::size_t kMaxCodePoints = 6;     // libvterm's VTERM_MAX_CHARS_PER_CELL
    static constexpr std::size_t kMaxCsiArguments = 16;  // libvterm's CSI_ARGS_MAX
    // Most bytes given to `out` at once: libvterm's text path keeps a code point per byte of
    // a write on the stack.
    static constexpr std::size_t kChunkBytes = 4096;
    using Sink = std::function<void(std::string_view)>;

    // Gives `out`, in order, the bytes of `in` with each REP expanded.
    void feed(std::string_view in, std::size_t max_count, const Sink& out);
    // libvterm's parser was put back to its ground state (the emulator wrote CAN to it).
    void reset();

  private:
    enum class State : std::uint8_t {
        Normal,
        Escape,
        CsiLeader,
        CsiArgs,
        CsiIntermed,
        CsiDropped,
        String,
        EscapeInString
    };
    void forget() { recent_size_ = 0; }
    void interrupt() { joinable_ = false; }
    void remember(char32_t code_point);
    // False when there was nothing to repeat.
    bool repeat(std::uint64_t count, const Sink& out) const;

    State state_ = State::Normal;
    bool escape_intermediate_ = false;  // ESC followed by an intermediate byte
    bool csi_leader_ = false, csi_intermediate_ = false;
    bool csi_first_argument_ = true;
    std::size_t csi_separators_ = 0;
    std::uint64_t csi_count_ = 0;  // the first argument, saturated
    bool single_shift_ = false;    // SS2/SS3 ran: the next character is not repeated
    bool joinable_ = false;        // the last thing in the stream was a character
    // The last character printed: its base and the marks joined to it (the newest 8 code
    // points of them).
    std::array<char32_t, 8> recent_{};
    std::size_t recent_size_ = 0;
};

}  // namespace ptyvisor::screen
