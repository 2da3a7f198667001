// terminal_screen's answer: a SCREEN reply (docs/protocol.md, section 10.3) as text a model
// reads, and as structured content. Pure and unit-tested (screen_view_test.cpp).
//
// The text, for a model that counts rows badly and needs the cursor to act on a full-screen
// program:
//
//   size: 80 cols x 24 rows
//   cursor: row 1, col 2
//   alternate screen: no
//   title: "vim"
//   offset: 1234
//   -1|the line just above the screen (scrollback, when asked)
//    0|$ ls
//    1|a  b
//   (rows 2-23 are blank)
//
// Rows are numbered from 0 at the top, as the cursor is; scrollback lines count back from -1,
// as `tmux capture-pane -S -N` counts them. A row's text is the SCREEN line as it is
// (trailing blanks trimmed, which `ptyvisor screen` and `tmux capture-pane -p` also print);
// blank rows at the bottom are said in one line rather than printed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "protocol/screen_payloads.h"

namespace ptyvisor::cli::mcp {

// The text above, newline-terminated; then, when the reply has attributes, one line per run.
std::string screen_view_text(const protocol::ScreenReply& screen);

// The structured content: the SCREEN payload's members, as docs/protocol.md section 10.3 lists
// them (the protocol's own encoding, so the two never differ).
nlohmann::json screen_view_json(const protocol::ScreenReply& screen);

}  // namespace ptyvisor::cli::mcp
