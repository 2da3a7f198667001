// The key names of `ptyvisor send --keys`, as tmux's send-keys knows them: each argument is a
// key name (Enter, C-c, M-x, F5, ...) and becomes the bytes a terminal sends for that key, or
// is sent literally when it names no key. Pure, unit-tested (send_keys_test.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptyvisor::cli {

// The bytes of one key name, or nullopt when `name` is not a key name. Names and modifiers
// are case-insensitive, as in tmux:
//   - Enter, Tab, BTab, Escape/Esc, Space, BSpace/Backspace, Up, Down, Left, Right, Home,
//     End, PageUp/PgUp/PPage, PageDown/PgDn/NPage, Delete/DC, Insert/IC, F1..F12 (xterm's
//     sequences);
//   - C-x or ^x: control with a character (C-a..C-z, C-@/C-Space, C-[, C-\, C-], C-^, C-_,
//     C-?);
//   - M-x: ESC, then the rest (a character or any key name: M-Enter, M-C-x);
//   - a single character: itself.
std::optional<std::string> key_bytes(std::string_view name);

// What `send --keys ARG...` sends: the bytes of each argument in order, with nothing between
// them (`send --keys 'ls -l' Enter` sends "ls -l\r"); an argument that names no key is sent
// as it is.
std::string keys_to_bytes(const std::vector<std::string>& args);

}  // namespace ptyvisor::cli
