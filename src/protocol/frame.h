// Frames: the unit of the ptyvisor wire protocol (docs/protocol.md is the normative text).
//
// A frame is an 8-byte header followed by `length` payload bytes:
//
//   offset 0  u8   magic0 'P' (0x50)
//   offset 1  u8   magic1 'V' (0x56)
//   offset 2  u8   version (kOldestVersion..kVersion; a connection speaks its first frame's)
//   offset 3  u8   type (FrameType)
//   offset 4  u32  payload length, big-endian
//
// Every length is checked against max_payload(type) before a byte of payload is
// allocated or read.
//
// The numbers (types, versions, bounds) come from protocol/protocol.json through the
// generated protocol/wire_spec.h; the enumerators below are checked against it at compile
// time, so this header names them and cannot disagree with the description.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "protocol/error_code.h"
#include "protocol/wire_spec.h"

namespace ptyvisor::protocol {

inline constexpr std::uint8_t kMagic0 = 'P';
inline constexpr std::uint8_t kMagic1 = 'V';
// The newest version this code speaks, and the oldest it still serves. Version 2 adds the
// frames of sessions that outlive their connection (types 12 and up); a version 1 frame
// of those types is an unknown type. Version 3 adds SNAPSHOT and SCREEN (types 27, 28).
inline constexpr std::uint8_t kVersion = wire::kNewestVersion;
inline constexpr std::uint8_t kOldestVersion = wire::kOldestVersion;
inline constexpr std::size_t kHeaderSize = wire::kHeaderSize;

enum class FrameType : std::uint8_t {
    Start = 1,          // client -> server, JSON, carries exactly one fd (the cwd)
    Started = 2,        // server -> client, JSON
    Input = 3,          // client -> server, raw bytes, 1..kMaxIoPayloadSize
    Output = 4,         // server -> client, raw bytes, 1..kMaxIoPayloadSize
    Resize = 5,         // client -> server, JSON
    Signal = 6,         // client -> server, JSON
    Stop = 7,           // client -> server, empty
    Exit = 8,           // server -> client, JSON, last frame of a session
    Error = 9,          // server -> client, JSON, last frame of a connection
    StatusRequest = 10, // client -> server, empty, root only
    Status = 11,        // server -> client, JSON
    // Version 2.
    Attach = 12,        // client -> server, JSON: join a session by id
    Attached = 13,      // server -> client, JSON; OUTPUT follows from its offset
    Detach = 14,        // client -> server, empty: leave; the session goes on
    Detached = 15,      // server -> client, JSON, last frame of a connection
    List = 16,          // client -> server, empty
    Sessions = 17,      // server -> client, JSON, last frame
    Read = 18,          // client -> server, JSON
    Log = 19,           // server -> client, JSON; `length` bytes of OUTPUT follow, then close
    Wait = 20,          // client -> server, JSON
    Waited = 21,        // server -> client, JSON, last frame
    Kill = 22,          // client -> server, JSON
    Killed = 23,        // server -> client, JSON, last frame
    Send = 24,          // client -> server, 32 hex digits of the id, then the input bytes
    Sent = 25,          // server -> client, JSON, last frame
    Dropped = 26,       // server -> client, JSON: output before `offset` is gone
    // Version 3.
    Snapshot = 27,      // client -> server, JSON: what a session's terminal shows
    Screen = 28,        // server -> client, JSON, last frame
    // Version 4.
    Commands = 29,      // client -> server, JSON: a session's command records
    CommandList = 30,   // server -> client, JSON, last frame
    Exec = 31,          // client -> server, JSON: run one command line in the session's shell
    Executed = 32,      // server -> client, JSON, last frame
    Watch = 33,         // client -> server, JSON: subscribe to a session's events
    Event = 34,         // server -> client, JSON, one per event; the "exit" event is the last frame
    // Version 5.
    Control = 35,       // client -> server, JSON: a person takes or hands back the terminal
    Controller = 36,    // server -> client, JSON: who holds the terminal now (not a last frame)
    Refused = 37,       // server -> client, JSON: an INPUT or RESIZE was refused (not a last frame)
    Recording = 38,     // client -> server, JSON: a session's asciicast recording
    Cast = 39,          // server -> client, JSON; `length` bytes of OUTPUT follow, then close
};

// The description of a frame type of this protocol (a FrameType enumerator).
constexpr const wire::FrameSpec& spec_of(FrameType type) {
    return wire::kFrames.at(static_cast<std::size_t>(type) - 1);
}

// Largest START payload (it carries argv and the environment), the largest of a request.
inline constexpr std::uint32_t kMaxPayloadSize = spec_of(FrameType::Start).max_payload;
// Largest INPUT or OUTPUT payload. 64 KiB is one PTY read at most and one socket write.
inline constexpr std::uint32_t kMaxIoPayloadSize = spec_of(FrameType::Input).max_payload;
// Largest payload of the small control frames (RESIZE, SIGNAL, STARTED, EXIT, ERROR).
inline constexpr std::uint32_t kMaxControlPayloadSize = spec_of(FrameType::Resize).max_payload;
// Largest STATUS reply (a daemon with many sessions).
inline constexpr std::uint32_t kMaxStatusPayloadSize = spec_of(FrameType::Status).max_payload;
// A session id: the 32 lowercase hex digits of its unit name. SEND's payload begins with it.
inline constexpr std::size_t kSessionIdLength = wire::kSessionIdLength;

std::string_view to_string(FrameType type);
// Whether `type` is a frame type of protocol `version`.
bool is_known(std::uint8_t type, std::uint8_t version = kVersion);

struct Header {
    FrameType type;
    std::uint32_t length;
    std::uint8_t version = kVersion;
};

// Smallest and largest payload a frame of this type may have.
std::uint32_t min_payload(FrameType type);
std::uint32_t max_payload(FrameType type);

// Parses and validates a header: magic, version, known type, length within the type's bounds.
// On failure returns the error code to report (BadFrame, UnsupportedVersion, TooBig).
struct HeaderResult {
    std::optional<Header> header;
    ErrorCode error = ErrorCode::BadFrame;
};
HeaderResult parse_header(std::span<const std::uint8_t, kHeaderSize> bytes);

void write_header(FrameType type, std::uint32_t length, std::span<std::uint8_t, kHeaderSize> out,
                  std::uint8_t version = kVersion);

// A whole encoded frame. Throws std::length_error if payload exceeds max_payload(type).
std::vector<std::uint8_t> encode_frame(FrameType type, std::span<const std::uint8_t> payload,
                                       std::uint8_t version = kVersion);
std::vector<std::uint8_t> encode_frame(FrameType type, std::string_view payload, std::uint8_t version = kVersion);

struct Frame {
    FrameType type;
    std::uint8_t version = kVersion;
    std::vector<std::uint8_t> payload;

    [[nodiscard]] std::string_view text() const {
        return {reinterpret_cast<const char*>(payload.data()), payload.size()};
    }
};

}  // namespace ptyvisor::protocol
