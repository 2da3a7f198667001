#include "screen/emulator.h"

extern "C" {
#include <vterm.h>
}

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "common/utf8.h"

namespace ptyvisor::screen {
namespace {

constexpr std::uint32_t kWidePadding = 0xffffffffu;  // libvterm's right half of a wide character

void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) cp = 0xfffd;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

// The code point at s[i], advancing `i` past it; U+FFFD for an ill-formed part (never in the
// text we encoded ourselves).
std::uint32_t next_code_point(std::string_view s, std::size_t& i) {
    const utf8::Sequence sequence = utf8::next(s.substr(i));
    i += sequence.length;
    return sequence.kind == utf8::Sequence::Kind::Character ? sequence.code_point : 0xfffd;
}

// Appends one cell's characters; a blank cell is a space, a wide character's right half
// nothing. Returns the number of code points (0 for the right half).
std::uint8_t append_cell(std::string& out, const VTermScreenCell& cell) {
    if (cell.chars[0] == kWidePadding) return 0;
    if (cell.chars[0] == 0) {
        out += ' ';
        return 1;
    }
    std::uint8_t n = 0;
    for (; n < VTERM_MAX_CHARS_PER_CELL && cell.chars[n]; ++n) append_utf8(out, cell.chars[n]);
    return n;
}

void trim_right(std::string& s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
}

protocol::Colour colour_of(const VTermColor& c, bool is_default) {
    if (is_default) return {};
    if (VTERM_COLOR_IS_INDEXED(&c)) return {protocol::Colour::Kind::Indexed, c.indexed.idx};
    return {protocol::Colour::Kind::Rgb,
            std::uint32_t{c.rgb.red} << 16 | std::uint32_t{c.rgb.green} << 8 | std::uint32_t{c.rgb.blue}};
}

protocol::AttributeRun run_of(const VTermScreenCell& cell, int row, int col) {
    protocol::AttributeRun r;
    r.row = static_cast<std::uint16_t>(row);
    r.col = static_cast<std::uint16_t>(col);
    r.bold = cell.attrs.bold;
    r.italic = cell.attrs.italic;
    r.blink = cell.attrs.blink;
    r.reverse = cell.attrs.reverse;
    r.strike = cell.attrs.strike;
    r.underline = static_cast<std::uint8_t>(cell.attrs.underline);
    r.fg = colour_of(cell.fg, VTERM_COLOR_IS_DEFAULT_FG(&cell.fg));
    r.bg = colour_of(cell.bg, VTERM_COLOR_IS_DEFAULT_BG(&cell.bg));
    return r;
}

bool same_look(const protocol::AttributeRun& a, const protocol::AttributeRun& b) {
    return a.bold == b.bold && a.italic == b.italic && a.blink == b.blink && a.reverse == b.reverse &&
           a.strike == b.strike && a.underline == b.underline && a.fg == b.fg && a.bg == b.bg;
}

bool is_plain(const protocol::AttributeRun& r) { return same_look(r, protocol::AttributeRun{}); }

// "rgb:RRRR/GGGG/BBBB", as xterm answers a colour query.
std::string xterm_rgb(const VTermColor& c) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "rgb:%02x%02x/%02x%02x/%02x%02x", c.rgb.red, c.rgb.red, c.rgb.green, c.rgb.green,
                  c.rgb.blue, c.rgb.blue);
    return buf;
}

}  // namespace

// A line that scrolled off: its text and, when any cell is not one code point of width
// one, each cell's code point count (0: a wide character's right half), so that a line
// libvterm takes back (the screen grew taller) gets its cells again.
struct Emulator::ScrollLine {
    std::string text;
    std::vector<std::uint8_t> cell_code_points;
};

struct Emulator::Callbacks {
    static Emulator& self(void* user) { return *static_cast<Emulator*>(user); }
    static int settermprop(VTermProp prop, VTermValue* val, void* user) {
        auto& e = self(user);
        switch (prop) {
            case VTERM_PROP_CURSORVISIBLE: e.cursor_visible_ = val->boolean; break;
            case VTERM_PROP_ALTSCREEN: e.alternate_ = val->boolean; break;
            case VTERM_PROP_TITLE: {
                e.title_.clear();
                // Titles are shown as text: control characters and invalid bytes never pass.
                const std::string_view raw = val->string ? val->string : "";
                std::size_t i = 0;
                while (i < raw.size() && e.title_.size() < protocol::kMaxTitleLength - 4)
                    append_utf8(e.title_, next_code_point(raw, i));  // U+FFFD for an ill-formed part
                break;
            }
            default: break;
        }
        return 1;
    }
    static int sb_pushline(int cols, const VTermScreenCell* cells, void* user) {
        self(user).push_scrollback(cols, cells);
        return 1;
    }
    static int sb_popline(int cols, VTermScreenCell* cells, void* user) {
        return self(user).pop_scrollback(cols, cells) ? 1 : 0;
    }
    static void output(const char* s, std::size_t len, void* user) { self(user).answer(s, len); }
    static int osc(const char* command, std::size_t len, void* user) {
        self(user).on_osc(std::string_view(command, len));
        return 1;
    }
};

namespace {
const VTermScreenCallbacks kScreenCallbacks = {
    nullptr, nullptr, nullptr, &Emulator::Callbacks::settermprop, nullptr, nullptr,
    &Emulator::Callbacks::sb_pushline, &Emulator::Callbacks::sb_popline};
const VTermParserCallbacks kFallbacks = {nullptr, nullptr, nullptr, nullptr, &Emulator::Callbacks::osc, nullptr, nullptr};
}  // namespace

// libvterm 0.1.4 writes out of bounds when a wide character is printed on a screen one column
// wide (fuzz/known_crashes/). Such a terminal is emulated two columns wide; everything read back
// (rows, cursor, attributes) covers only the columns the session has.
int Emulator::emulated_cols(std::uint16_t cols) { return std::max<int>(cols, 2); }

Emulator::Emulator(std::uint16_t cols, std::uint16_t rows, std::uint32_t scrollback_limit)
    : cols_(std::clamp<std::uint16_t>(cols, 1, kMaxSide)),
      rows_(std::clamp<std::uint16_t>(rows, 1, kMaxSide)),
      scrollback_limit_(std::min(scrollback_limit, protocol::kMaxScrollbackLines)) {
    vt_ = vterm_new(rows_, emulated_cols(cols_));
    if (!vt_) throw std::bad_alloc();
    vterm_set_utf8(vt_, 1);
    vterm_output_set_callback(vt_, &Callbacks::output, this);
    screen_ = vterm_obtain_screen(vt_);
    vterm_screen_set_callbacks(screen_, &kScreenCallbacks, this);
    vterm_screen_set_unrecognised_fallbacks(screen_, &kFallbacks, this);
    // The alternate screen is enabled in feed(), before the first bytes that may switch to it:
    // most sessions never do, and its cells are half of what an emulator costs.
    vterm_screen_reset(screen_, 1);
}

Emulator::~Emulator() { vterm_free(vt_); }

void Emulator::feed(std::span<const std::uint8_t> bytes) {
    filtered_.clear();
    utf8_.decode(bytes, filtered_);
    if (filtered_.empty()) return;
    if (!alternate_cells_ && alt_watch_.scan(filtered_)) {
        vterm_screen_enable_altscreen(screen_, 1);
        alternate_cells_ = true;
    }
    // libvterm never sees a REP (rep_expander.h says why). A REP prints at most a row of
    // characters: exact for every count that fits the row (how programs use it), and no dearer
    // than a line feed. A cap of a screen (rows * columns) let 12 bytes cost the worker 4.9 s
    // of CPU on a 1000x1000 screen (every copy past the first screen scrolls all of it).
    const std::size_t max_repeat = static_cast<std::size_t>(emulated_cols(cols_));
    rep_.feed(filtered_, max_repeat, [this](std::string_view part) {
        if (!part.empty()) vterm_input_write(vt_, part.data(), part.size());
    });
}

void Emulator::resize(std::uint16_t cols, std::uint16_t rows) {
    cols_ = std::clamp<std::uint16_t>(cols, 1, kMaxSide);
    rows_ = std::clamp<std::uint16_t>(rows, 1, kMaxSide);
    vterm_set_size(vt_, rows_, emulated_cols(cols_));
    reset_margins_after_resize();
}

// After a resize, the scrolling margins are reset and the cursor stays where libvterm put it,
// as xterm does. Two faults of libvterm 0.1.4 (Debian 12's), both found by fuzz_screen against
// an instrumented build of it, make this necessary:
// - a shrink clamps the bottom margin to the new height but not the top one, so a region set
//   below the new bottom makes the next scroll move a negative number of lines (memmove with
//   a negative size); likewise the left margin with the width;
// - a shrink moves the cursor up by the lines it pushes into the scrollback, to a negative row
//   when the cursor was above them, and the next character indexes the line table there.
// The public API can set neither, so the emulator feeds what a program would: CAN (ending any
// sequence the session's output left half-written, which would swallow the rest), DECSTBM and
// DECSLRM with no arguments (libvterm 0.1.4 takes CSI s as DECSLRM always), which home the
// cursor, then a CUP back to the cursor's place, on the screen. The margins are reset whole,
// so that CUP is absolute even in origin mode.
void Emulator::reset_margins_after_resize() {
    VTermPos cursor{};
    vterm_state_get_cursorpos(vterm_obtain_state(vt_), &cursor);
    const int row = std::clamp(cursor.row, 0, static_cast<int>(rows_) - 1);
    const int col = std::clamp(cursor.col, 0, emulated_cols(cols_) - 1);
    const std::string reset = "\x18\x1b[r\x1b[s\x1b[" + std::to_string(row + 1) + ";" + std::to_string(col + 1) + "H";
    vterm_input_write(vt_, reset.data(), reset.size());
    rep_.reset();  // the CAN put libvterm's parser back to its ground state
}

void Emulator::answer(const char* bytes, std::size_t length) {
    // Seven-bit forms only: a program that switched the terminal to eight-bit controls
    // (S8C1T) still gets answers the daemon's checks know.
    for (std::size_t i = 0; i < length && answers_.size() + 2 <= kMaxAnswerBytes; ++i) {
        const auto b = static_cast<unsigned char>(bytes[i]);
        if (b >= 0x80 && b < 0xa0) {
            answers_ += '\x1b';
            answers_ += static_cast<char>(b - 0x40);
        } else {
            answers_ += static_cast<char>(b);
        }
    }
}

std::string Emulator::take_answers() { return std::exchange(answers_, {}); }

void Emulator::on_osc(std::string_view command) {
    // Colour queries: OSC 10 ; ? (foreground), OSC 11 ; ? (background), OSC 4 ; N ; ?.
    VTermState* state = vterm_obtain_state(vt_);
    VTermColor fg, bg;
    vterm_state_get_default_colors(state, &fg, &bg);
    vterm_state_convert_color_to_rgb(state, &fg);
    vterm_state_convert_color_to_rgb(state, &bg);
    std::string reply;
    if (command == "10;?") reply = "\x1b]10;" + xterm_rgb(fg);
    else if (command == "11;?") reply = "\x1b]11;" + xterm_rgb(bg);
    else if (command.starts_with("4;") && command.ends_with(";?") && command.size() >= 5 && command.size() <= 7) {
        int index = 0;
        for (char c : command.substr(2, command.size() - 4)) {
            if (c < '0' || c > '9') return;
            index = index * 10 + (c - '0');
        }
        if (index > 255) return;
        VTermColor c;
        vterm_state_get_palette_color(state, index, &c);
        vterm_state_convert_color_to_rgb(state, &c);
        reply = "\x1b]4;" + std::to_string(index) + ";" + xterm_rgb(c);
    }
    if (reply.empty()) return;
    reply += "\x1b\\";
    answer(reply.data(), reply.size());
}

void Emulator::push_scrollback(int cols, const void* raw) {
    if (scrollback_limit_ == 0) return;
    const auto* cells = static_cast<const VTermScreenCell*>(raw);
    ScrollLine line;
    bool simple = true;
    std::vector<std::uint8_t> counts(static_cast<std::size_t>(cols));
    for (int c = 0; c < cols; ++c) {
        counts[c] = append_cell(line.text, cells[c]);
        if (counts[c] != 1) simple = false;
    }
    trim_right(line.text);
    if (!simple) line.cell_code_points = std::move(counts);
    line.text.shrink_to_fit();
    if (scrollback_.size() >= scrollback_limit_) scrollback_.pop_front();
    scrollback_.push_back(std::move(line));
}

bool Emulator::pop_scrollback(int cols, void* raw) {
    if (scrollback_.empty()) return false;
    auto* cells = static_cast<VTermScreenCell*>(raw);
    VTermState* state = vterm_obtain_state(vt_);
    VTermColor fg, bg;
    vterm_state_get_default_colors(state, &fg, &bg);
    const ScrollLine& line = scrollback_.back();
    std::size_t at = 0;
    for (int c = 0; c < cols; ++c) {
        VTermScreenCell& cell = cells[c];
        std::memset(&cell, 0, sizeof cell);
        cell.width = 1;
        cell.fg = fg;
        cell.bg = bg;
        const std::size_t n = line.cell_code_points.empty() ? 1
                              : static_cast<std::size_t>(c) < line.cell_code_points.size() ? line.cell_code_points[c]
                                                                                             : 1;
        if (n == 0) {
            cell.chars[0] = kWidePadding;
            if (c > 0) cells[c - 1].width = 2;
            continue;
        }
        for (std::size_t k = 0; k < n && k < VTERM_MAX_CHARS_PER_CELL && at < line.text.size(); ++k)
            cell.chars[k] = next_code_point(line.text, at);
    }
    scrollback_.pop_back();
    return true;
}

std::string Emulator::row_text(int row) const {
    std::string text;
    VTermScreenCell cell;
    for (int c = 0; c < cols_; ++c) {
        vterm_screen_get_cell(screen_, VTermPos{row, c}, &cell);
        // A wide character that does not fit the session's columns (one, see emulated_cols)
        // is not on its screen: a blank, as tmux shows it.
        if (cell.width > 1 && c + cell.width > cols_) {
            text += ' ';
            continue;
        }
        append_cell(text, cell);
    }
    trim_right(text);
    return text;
}

protocol::ScreenReply Emulator::snapshot(std::uint32_t scrollback, bool attributes) const {
    protocol::ScreenReply s;
    s.cols = cols_;
    s.rows = rows_;
    VTermPos cursor;
    vterm_state_get_cursorpos(vterm_obtain_state(vt_), &cursor);
    s.cursor_row = static_cast<std::uint16_t>(std::clamp(cursor.row, 0, rows_ - 1));
    s.cursor_col = static_cast<std::uint16_t>(std::clamp(cursor.col, 0, cols_ - 1));
    s.cursor_visible = cursor_visible_;
    s.alternate = alternate_;
    s.title = title_;
    s.lines.reserve(rows_);
    for (int r = 0; r < rows_; ++r) s.lines.push_back(row_text(r));
    const std::size_t first = scrollback_.size() - std::min<std::size_t>(scrollback, scrollback_.size());
    for (std::size_t i = first; i < scrollback_.size(); ++i) s.scrollback.push_back(scrollback_[i].text);
    if (attributes) {
        std::vector<protocol::AttributeRun> runs;
        VTermScreenCell cell;
        for (int r = 0; r < rows_; ++r) {
            for (int c = 0; c < cols_; ++c) {
                vterm_screen_get_cell(screen_, VTermPos{r, c}, &cell);
                if (cell.chars[0] == kWidePadding) {
                    if (!runs.empty() && runs.back().row == r && runs.back().col + runs.back().width == c) ++runs.back().width;
                    continue;
                }
                auto run = run_of(cell, r, c);
                if (is_plain(run)) continue;
                auto& last = runs.empty() ? run : runs.back();
                if (!runs.empty() && last.row == r && last.col + last.width == c && same_look(last, run)) ++last.width;
                else runs.push_back(run);
            }
        }
        s.attributes = std::move(runs);
    }
    return s;
}

}  // namespace ptyvisor::screen
