// Whether libvterm 0.1.4 joins a code point to the character before it (a combining mark,
// in its own table) rather than printing it as a character of its own.
//
// libvterm keeps that table internal (not exported), and a copy of it would drift from the
// library the emulator links: so the library is asked, on a private one-row terminal.
// Invariant: the answer is libvterm's own for that code point. Not thread-safe (the screen
// worker has one thread).
#pragma once

namespace ptyvisor::screen {

bool libvterm_combines(char32_t code_point);

}  // namespace ptyvisor::screen
