#include "screen/libvterm_combining.h"

extern "C" {
#include <vterm.h>
}

#include <cstdint>
#include <new>
#include <string>

namespace ptyvisor::screen {

namespace {

void append_utf8(std::string& out, char32_t cp) {
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

// One row of eight columns: room for "a" and a wide character after it.
struct Probe {
    VTerm* vt;
    VTermScreen* screen;
    Probe() : vt(vterm_new(1, 8)) {
        if (!vt) throw std::bad_alloc();
        vterm_set_utf8(vt, 1);
        screen = vterm_obtain_screen(vt);
        vterm_screen_reset(screen, 1);
    }
    ~Probe() { vterm_free(vt); }
    Probe(const Probe&) = delete;
    Probe& operator=(const Probe&) = delete;
};

}  // namespace

// "a" then the code point, from the start of the line, in one write (one text run): the cell
// of the "a" holds the code point too exactly when libvterm took it as a combining mark. The
// CR makes every probe start at column 0 whatever the one before left.
bool libvterm_combines(char32_t code_point) {
    if (code_point < 0x80) return false;  // no ASCII character combines
    static Probe probe;
    std::string bytes = "\ra";
    append_utf8(bytes, code_point);
    vterm_input_write(probe.vt, bytes.data(), bytes.size());
    VTermScreenCell cell;
    vterm_screen_get_cell(probe.screen, VTermPos{0, 0}, &cell);
    return cell.chars[0] == 'a' && cell.chars[1] == static_cast<std::uint32_t>(code_point);
}

}  // namespace ptyvisor::screen
