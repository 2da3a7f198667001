// Emulator: one session's screen, over libvterm (README, "Dependencies", says why libvterm).
//
// Fed the session's output bytes in order, it keeps what a terminal of TERM xterm-256color
// would show: the rows, the cursor, the alternate screen, the title, and up to
// `scrollback_limit` lines that scrolled off the top (text only; attributes are kept for
// the visible rows). Answers to the queries a program sends (DSR, DA, OSC 10/11, ...) are
// collected, in order, for take_answers().
//
// Invariants: every input is accepted (hostile bytes only change what is shown); memory is
// bounded by the size, the scrollback limit and libvterm's per-cell storage (one screen of
// cells, two once a program may have switched to the alternate one); nothing here does I/O.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "screen/alt_screen_watch.h"
#include "screen/rep_expander.h"
#include "protocol/screen_payloads.h"

struct VTerm;
struct VTermScreen;

namespace ptyvisor::screen {

class Emulator {
  public:
    static constexpr std::uint16_t kMaxSide = protocol::kMaxScreenSide;
    // Most bytes of answers held between two take_answers().
    static constexpr std::size_t kMaxAnswerBytes = 4096;

    // `cols` and `rows` are clamped to 1..kMaxSide.
    Emulator(std::uint16_t cols, std::uint16_t rows, std::uint32_t scrollback_limit);
    ~Emulator();
    Emulator(const Emulator&) = delete;
    Emulator& operator=(const Emulator&) = delete;

    void feed(std::span<const std::uint8_t> bytes);
    void resize(std::uint16_t cols, std::uint16_t rows);
    [[nodiscard]] std::uint16_t cols() const { return cols_; }
    [[nodiscard]] std::uint16_t rows() const { return rows_; }

    // What the screen shows now; `scrollback` lines at most (the newest), attribute runs
    // when `attributes`. id and offset are the caller's to fill.
    [[nodiscard]] protocol::ScreenReply snapshot(std::uint32_t scrollback, bool attributes) const;

    // The answers to queries since the last call, as the terminal would have written them.
    std::string take_answers();
    [[nodiscard]] bool has_answers() const { return !answers_.empty(); }
    // Whether the alternate screen's cells exist: made before the first bytes that may switch
    // to it (alt_screen_watch.h), not with the emulator.
    [[nodiscard]] bool has_alternate_cells() const { return alternate_cells_; }

    // libvterm's callbacks (C linkage trampolines in emulator.cpp).
    struct Callbacks;

  private:
    struct ScrollLine;
    void reset_margins_after_resize();
    void push_scrollback(int cols, const void* cells);
    bool pop_scrollback(int cols, void* cells);
    void answer(const char* bytes, std::size_t length);
    void on_osc(std::string_view command);
    [[nodiscard]] std::string row_text(int row) const;

    VTerm* vt_ = nullptr;
    VTermScreen* screen_ = nullptr;
    static int emulated_cols(std::uint16_t cols);
    std::uint16_t cols_, rows_;
    std::uint32_t scrollback_limit_;
    std::deque<ScrollLine> scrollback_;
    // libvterm 0.1.4 (Debian 12's) decodes UTF-8 into an array of one code point per input
    // byte. A character left unfinished by one write, then followed by ASCII in the next,
    // makes it store two code points for one byte (U+FFFD, then the letter): one past the
    // array, on the stack (found by fuzz_screen against an instrumented build of that
    // libvterm). So libvterm is fed whole, well-formed characters only, through this.
    utf8::StreamDecoder utf8_;
    std::string filtered_;   // reused by feed()
    RepExpander rep_;        // after utf8_: no REP and no CSI of too many arguments reaches libvterm
    std::string answers_;
    std::string title_;
    bool cursor_visible_ = true;
    bool alternate_ = false;
    AltScreenWatch alt_watch_;
    bool alternate_cells_ = false;
};

}  // namespace ptyvisor::screen
