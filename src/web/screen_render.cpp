#include "web/screen_render.h"

#include <locale.h>
#include <wchar.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ptyvisor::web {
namespace {

// Decodes one UTF-8 code point at `s[i]` (the daemon checked the lines are UTF-8; anything
// else becomes U+FFFD, one byte at a time). Advances `i`.
char32_t next_code_point(std::string_view s, std::size_t& i) {
    const auto b = static_cast<unsigned char>(s[i]);
    int extra = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : -1;
    if (extra < 0 || i + static_cast<std::size_t>(extra) >= s.size()) {
        ++i;
        return 0xFFFD;
    }
    char32_t c = extra == 0 ? b : b & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
        const auto t = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
        if ((t & 0xC0) != 0x80) {
            ++i;
            return 0xFFFD;
        }
        c = (c << 6) | (t & 0x3F);
    }
    i += static_cast<std::size_t>(extra) + 1;
    return c;
}

void append_utf8(std::string& out, char32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

bool is_control(char32_t c) { return c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0); }

// wcwidth() answers for the calling thread's locale: C.UTF-8 here, whatever the process's.
int columns_of(char32_t c) {
    static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
    if (!utf8) return 1;
    const locale_t old = uselocale(utf8);
    const int w = wcwidth(static_cast<wchar_t>(c));
    uselocale(old);
    return w;
}

// One cell's text: a code point of width 1 or 2 and the zero-width ones that follow it.
struct Cell {
    std::string text;
    int width = 1;
};

std::vector<Cell> cells_of(std::string_view line) {
    std::vector<Cell> cells;
    for (std::size_t i = 0; i < line.size();) {
        const char32_t c = next_code_point(line, i);
        if (is_control(c)) {
            cells.push_back({" ", 1});  // never written through: it could start a sequence
            continue;
        }
        const int w = columns_of(c);
        if (w == 0 && !cells.empty()) {
            append_utf8(cells.back().text, c);
            continue;
        }
        Cell cell;
        append_utf8(cell.text, c);
        cell.width = w == 2 ? 2 : 1;
        cells.push_back(std::move(cell));
    }
    return cells;
}

void colour_sgr(std::string& out, const protocol::Colour& c, bool background) {
    using K = protocol::Colour::Kind;
    if (c.kind == K::Default) return;
    out += ';';
    if (c.kind == K::Indexed && c.value < 8) {
        out += std::to_string((background ? 40 : 30) + c.value);
    } else if (c.kind == K::Indexed && c.value < 16) {
        out += std::to_string((background ? 100 : 90) + c.value - 8);
    } else if (c.kind == K::Indexed) {
        out += (background ? "48;5;" : "38;5;") + std::to_string(c.value & 0xFF);
    } else {
        out += (background ? "48;2;" : "38;2;") + std::to_string((c.value >> 16) & 0xFF) + ';' +
               std::to_string((c.value >> 8) & 0xFF) + ';' + std::to_string(c.value & 0xFF);
    }
}

// SGR for a run's attributes, from the default state ("\e[0;...m"); "\e[0m" for none.
std::string sgr(const protocol::AttributeRun* run) {
    std::string s = "\x1b[0";
    if (run) {
        if (run->bold) s += ";1";
        if (run->italic) s += ";3";
        if (run->underline == 1) s += ";4";
        if (run->underline == 2) s += ";4:2";
        if (run->underline == 3) s += ";4:3";
        if (run->blink) s += ";5";
        if (run->reverse) s += ";7";
        if (run->strike) s += ";9";
        colour_sgr(s, run->fg, false);
        colour_sgr(s, run->bg, true);
    }
    return s + 'm';
}

// A screen row: its cells, with the attribute run of each column (runs do not overlap).
void render_row(std::string& out, std::string_view line, std::uint16_t row, std::uint16_t cols,
                const std::vector<protocol::AttributeRun>* runs) {
    std::vector<const protocol::AttributeRun*> at(cols, nullptr);
    bool any = false;
    if (runs)
        for (const auto& r : *runs)
            if (r.row == row)
                for (unsigned c = r.col; c < static_cast<unsigned>(r.col) + r.width && c < cols; ++c) at[c] = &r, any = true;
    if (!any) {
        for (const auto& cell : cells_of(line)) out += cell.text;
        return;
    }
    const protocol::AttributeRun* current = nullptr;
    unsigned col = 0;
    auto set = [&](const protocol::AttributeRun* r) {
        if (r == current) return;
        out += sgr(r);
        current = r;
    };
    for (const auto& cell : cells_of(line)) {
        if (col >= cols) break;
        set(at[col]);
        out += cell.text;
        col += static_cast<unsigned>(cell.width);
    }
    // Blank cells that still show attributes (a coloured background past the trimmed text).
    unsigned last = cols;
    while (last > col && !at[last - 1]) --last;
    for (; col < last; ++col) {
        set(at[col]);
        out += ' ';
    }
    if (current) out += "\x1b[0m";
}

}  // namespace

std::string render_screen(const protocol::ScreenReply& screen) {
    std::string out;
    if (screen.alternate) out += "\x1b[?1049h";
    if (!screen.title.empty()) {
        out += "\x1b]2;";
        std::string_view t = screen.title;
        for (std::size_t i = 0; i < t.size();) {
            const char32_t c = next_code_point(t, i);
            if (!is_control(c)) append_utf8(out, c);
        }
        out += '\x07';
    }
    // The alternate screen has no scrollback: lines written there would be lost anyway.
    bool first = true;
    if (!screen.alternate)
        for (const auto& line : screen.scrollback) {
            if (!first) out += "\r\n";
            first = false;
            for (const auto& cell : cells_of(line)) out += cell.text;
        }
    const auto* runs = screen.attributes ? &*screen.attributes : nullptr;
    for (std::size_t r = 0; r < screen.lines.size(); ++r) {
        if (!first) out += "\r\n";
        first = false;
        render_row(out, screen.lines[r], static_cast<std::uint16_t>(r), screen.cols, runs);
    }
    out += "\x1b[" + std::to_string(screen.cursor_row + 1) + ';' + std::to_string(screen.cursor_col + 1) + 'H';
    if (!screen.cursor_visible) out += "\x1b[?25l";
    return out;
}

}  // namespace ptyvisor::web
