// Payloads of protocol version 3: SNAPSHOT and its SCREEN reply (docs/protocol.md, section
// 10). The request comes from a client and is hostile; the reply is built by the screen
// worker, an unprivileged process the daemon does not trust either, so decode_screen()
// checks a reply's whole shape against the bounds the daemon knows (the session's size and
// the scrollback it asked for) before the daemon forwards a byte of it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/payloads.h"

namespace ptyvisor::protocol {

// Most scrollback lines one SNAPSHOT may ask for, and most lines a session keeps.
inline constexpr std::uint32_t kMaxScrollbackLines = 10'000;
// Largest SCREEN payload: 200 x 50 with attributes and kMaxScrollbackLines of 200 columns
// fit with room; a terminal can be at most kMaxScreenCells cells.
inline constexpr std::uint32_t kMaxScreenPayloadSize = 8u * 1024 * 1024;
inline constexpr std::uint32_t kMaxScreenCells = 1'000'000;
// Widest and tallest screen an emulator keeps. A scrollback line keeps the width it had when
// it scrolled off, so it is bounded by this, not by today's columns.
inline constexpr std::uint16_t kMaxScreenSide = 1000;
// Longest title kept (bytes of UTF-8).
inline constexpr std::size_t kMaxTitleLength = 1024;

struct SnapshotRequest {
    std::string id;
    std::uint32_t scrollback = 0;  // 0..kMaxScrollbackLines
    bool attributes = false;
    bool operator==(const SnapshotRequest&) const = default;
};

// A colour: the terminal's default, one of the 256 palette entries, or 24-bit RGB.
struct Colour {
    enum class Kind { Default, Indexed, Rgb };
    Kind kind = Kind::Default;
    std::uint32_t value = 0;  // Indexed: 0..255; Rgb: 0xRRGGBB
    bool operator==(const Colour&) const = default;
};

// A run of cells on one row with the same attributes that are not all defaults.
struct AttributeRun {
    std::uint16_t row = 0, col = 0, width = 1;  // width >= 1, col + width <= cols
    bool bold = false, italic = false, blink = false, reverse = false, strike = false;
    std::uint8_t underline = 0;  // 0 none, 1 single, 2 double, 3 curly
    Colour fg, bg;
    bool operator==(const AttributeRun&) const = default;
};

struct ScreenReply {
    std::string id;
    std::uint16_t cols = 80, rows = 24;
    std::uint16_t cursor_row = 0, cursor_col = 0;  // < rows, < cols
    bool cursor_visible = true;
    bool alternate = false;            // the alternate screen is on
    std::string title;                 // OSC 0/2, at most kMaxTitleLength bytes
    std::uint64_t offset = 0;          // the log offset the screen shows: every byte before it
    std::vector<std::string> lines;    // exactly `rows` lines, trailing blanks trimmed
    std::vector<std::string> scrollback;  // oldest first, at most what was asked
    std::optional<std::vector<AttributeRun>> attributes;  // when asked for
    bool operator==(const ScreenReply&) const = default;
};

std::string encode(const SnapshotRequest& v);
std::string encode(const ScreenReply& v);
Decoded<SnapshotRequest> decode_snapshot(std::string_view json);

// Limits a reply must keep to. Zero fields: only the protocol's own bounds.
struct ScreenBounds {
    std::uint16_t cols = 0, rows = 0;
    std::uint32_t scrollback = kMaxScrollbackLines;
    bool attributes = true;  // whether attributes may be present
};
Decoded<ScreenReply> decode_screen(std::string_view json, const ScreenBounds& bounds = {});

}  // namespace ptyvisor::protocol
