// Payloads of protocol version 5 (docs/protocol.md, section 12): a person at the wheel
// (CONTROL, CONTROLLER, REFUSED) and recordings (RECORDING, CAST). Requests come from clients
// and are hostile: each decoder bounds every member and refuses what it does not expect.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/payloads.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::protocol {

// CONTROL: a supervisor attached to a session takes the terminal, or hands it back.
struct ControlRequest {
    bool take = true;
    bool operator==(const ControlRequest&) const = default;
};

// CONTROLLER: who holds the terminal now; `uid` names the person while one holds it (the
// daemon resolves no names: an NSS lookup could block its loop; clients map uids to names).
struct ControllerNotice {
    enum class Kind { Agent, Supervisor };
    Kind controller = Kind::Agent;
    std::optional<std::int64_t> uid{};
    std::int64_t since = 0;  // Unix milliseconds
    bool you = false;        // this connection holds it
    bool operator==(const ControllerNotice&) const = default;
};
std::string_view to_string(ControllerNotice::Kind kind);

// REFUSED: an INPUT or RESIZE of an attached controller that was not carried out.
struct RefusedNotice {
    std::string code;     // an error code (error_code.h), e.g. held_by_supervisor
    std::string message;  // for humans
    std::string what;     // "input", "resize" or "control"
    std::uint64_t count = 1;  // frames refused since the last REFUSED (at most one a second)
    bool operator==(const RefusedNotice&) const = default;
};

// RECORDING: part of a session's asciicast file. CAST answers, then `length` bytes follow.
inline constexpr std::uint64_t kDefaultRecordingChunk = 1024 * 1024;
inline constexpr std::uint64_t kMaxRecordingChunk = 16 * 1024 * 1024;
struct RecordingRequest {
    std::string id;
    std::uint64_t offset = 0;
    std::uint64_t max_bytes = kDefaultRecordingChunk;  // 1..kMaxRecordingChunk
    bool operator==(const RecordingRequest&) const = default;
};
struct CastReply {
    std::string id;
    std::uint64_t offset = 0;  // where the bytes that follow begin
    std::uint64_t length = 0;  // how many follow, in OUTPUT frames
    std::uint64_t size = 0;    // the file's size now (it grows while the session runs)
    bool operator==(const CastReply&) const = default;
};

std::string encode(const ControlRequest& v);
std::string encode(const ControllerNotice& v);
std::string encode(const RefusedNotice& v);
std::string encode(const RecordingRequest& v);
std::string encode(const CastReply& v);

Decoded<ControlRequest> decode_control(std::string_view json);
Decoded<ControllerNotice> decode_controller(std::string_view json);
Decoded<RefusedNotice> decode_refused(std::string_view json);
Decoded<RecordingRequest> decode_recording(std::string_view json);
Decoded<CastReply> decode_cast(std::string_view json);

}  // namespace ptyvisor::protocol
