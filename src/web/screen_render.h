// Turns the daemon's SCREEN (protocol section 10) into the bytes that draw it on a terminal
// that has just been reset to that size (xterm.js's reset()): the scrollback lines asked for,
// the screen's lines with their attributes, the title, the alternate screen and the cursor.
//
// Invariants:
//   - The result is UTF-8 and holds no control character but the sequences written here:
//     a title or a line from the (untrusted) screen worker cannot smuggle an escape sequence.
//   - Written after a reset, the screen's cells show what the reply says, row by row, and the
//     cursor is where it says (columns counted with wcwidth in C.UTF-8, as libvterm does).
#pragma once

#include <string>

#include "protocol/screen_payloads.h"

namespace ptyvisor::web {

std::string render_screen(const protocol::ScreenReply& screen);

}  // namespace ptyvisor::web
