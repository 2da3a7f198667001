#include "protocol/frame.h"

#include <stdexcept>

#include "protocol/screen_payloads.h"

namespace ptyvisor::protocol {

std::string_view to_string(FrameType type) {
    switch (type) {
        case FrameType::Start: return "START";
        case FrameType::Started: return "STARTED";
        case FrameType::Input: return "INPUT";
        case FrameType::Output: return "OUTPUT";
        case FrameType::Resize: return "RESIZE";
        case FrameType::Signal: return "SIGNAL";
        case FrameType::Stop: return "STOP";
        case FrameType::Exit: return "EXIT";
        case FrameType::Error: return "ERROR";
        case FrameType::StatusRequest: return "STATUS_REQUEST";
        case FrameType::Status: return "STATUS";
        case FrameType::Attach: return "ATTACH";
        case FrameType::Attached: return "ATTACHED";
        case FrameType::Detach: return "DETACH";
        case FrameType::Detached: return "DETACHED";
        case FrameType::List: return "LIST";
        case FrameType::Sessions: return "SESSIONS";
        case FrameType::Read: return "READ";
        case FrameType::Log: return "LOG";
        case FrameType::Wait: return "WAIT";
        case FrameType::Waited: return "WAITED";
        case FrameType::Kill: return "KILL";
        case FrameType::Killed: return "KILLED";
        case FrameType::Send: return "SEND";
        case FrameType::Sent: return "SENT";
        case FrameType::Dropped: return "DROPPED";
        case FrameType::Snapshot: return "SNAPSHOT";
        case FrameType::Screen: return "SCREEN";
    }
    return "UNKNOWN";
}

bool is_known(std::uint8_t type, std::uint8_t version) {
    const auto last = version >= 3 ? FrameType::Screen : version >= 2 ? FrameType::Dropped : FrameType::Status;
    return type >= static_cast<std::uint8_t>(FrameType::Start) && type <= static_cast<std::uint8_t>(last);
}

std::uint32_t min_payload(FrameType type) {
    switch (type) {
        case FrameType::Input:
        case FrameType::Output: return 1;
        case FrameType::Start:
        case FrameType::Started:
        case FrameType::Resize:
        case FrameType::Signal:
        case FrameType::Exit:
        case FrameType::Error:
        case FrameType::Status:
        case FrameType::Attach:
        case FrameType::Attached:
        case FrameType::Detached:
        case FrameType::Sessions:
        case FrameType::Read:
        case FrameType::Log:
        case FrameType::Wait:
        case FrameType::Waited:
        case FrameType::Kill:
        case FrameType::Killed:
        case FrameType::Sent:
        case FrameType::Dropped:
        case FrameType::Snapshot:
        case FrameType::Screen: return 2;  // "{}" at least
        case FrameType::Send: return kSessionIdLength + 1;
        case FrameType::Stop:
        case FrameType::StatusRequest:
        case FrameType::Detach:
        case FrameType::List: return 0;
    }
    return 0;
}

std::uint32_t max_payload(FrameType type) {
    switch (type) {
        case FrameType::Start: return kMaxPayloadSize;
        case FrameType::Status:
        case FrameType::Sessions: return kMaxStatusPayloadSize;
        case FrameType::Input:
        case FrameType::Output: return kMaxIoPayloadSize;
        case FrameType::Send: return kSessionIdLength + kMaxIoPayloadSize;
        case FrameType::Started:
        case FrameType::Resize:
        case FrameType::Signal:
        case FrameType::Exit:
        case FrameType::Error:
        case FrameType::Attach:
        case FrameType::Detached:
        case FrameType::Read:
        case FrameType::Log:
        case FrameType::Wait:
        case FrameType::Waited:
        case FrameType::Kill:
        case FrameType::Killed:
        case FrameType::Sent:
        case FrameType::Dropped:
        case FrameType::Snapshot: return kMaxControlPayloadSize;
        case FrameType::Screen: return kMaxScreenPayloadSize;
        case FrameType::Attached: return kMaxPayloadSize;  // carries argv
        case FrameType::Stop:
        case FrameType::StatusRequest:
        case FrameType::Detach:
        case FrameType::List: return 0;
    }
    return 0;
}

HeaderResult parse_header(std::span<const std::uint8_t, kHeaderSize> b) {
    if (b[0] != kMagic0 || b[1] != kMagic1) return {std::nullopt, ErrorCode::BadFrame};
    if (b[2] < kOldestVersion || b[2] > kVersion) return {std::nullopt, ErrorCode::UnsupportedVersion};
    if (!is_known(b[3], b[2])) return {std::nullopt, ErrorCode::BadFrame};
    const auto type = static_cast<FrameType>(b[3]);
    const std::uint32_t length = (std::uint32_t{b[4]} << 24) | (std::uint32_t{b[5]} << 16) |
                                 (std::uint32_t{b[6]} << 8) | std::uint32_t{b[7]};
    if (length > max_payload(type)) return {std::nullopt, ErrorCode::TooBig};
    if (length < min_payload(type)) return {std::nullopt, ErrorCode::BadFrame};
    return {Header{type, length, b[2]}, ErrorCode::BadFrame};
}

void write_header(FrameType type, std::uint32_t length, std::span<std::uint8_t, kHeaderSize> out,
                  std::uint8_t version) {
    out[0] = kMagic0;
    out[1] = kMagic1;
    out[2] = version;
    out[3] = static_cast<std::uint8_t>(type);
    out[4] = static_cast<std::uint8_t>(length >> 24);
    out[5] = static_cast<std::uint8_t>(length >> 16);
    out[6] = static_cast<std::uint8_t>(length >> 8);
    out[7] = static_cast<std::uint8_t>(length);
}

std::vector<std::uint8_t> encode_frame(FrameType type, std::span<const std::uint8_t> payload,
                                       std::uint8_t version) {
    if (payload.size() > max_payload(type) || payload.size() < min_payload(type))
        throw std::length_error("ptyvisor: payload size out of bounds for " +
                                std::string(to_string(type)));
    std::vector<std::uint8_t> frame(kHeaderSize + payload.size());
    write_header(type, static_cast<std::uint32_t>(payload.size()),
                 std::span<std::uint8_t, kHeaderSize>(frame.data(), kHeaderSize), version);
    std::copy(payload.begin(), payload.end(), frame.begin() + kHeaderSize);
    return frame;
}

std::vector<std::uint8_t> encode_frame(FrameType type, std::string_view payload, std::uint8_t version) {
    return encode_frame(type, std::span(reinterpret_cast<const std::uint8_t*>(payload.data()), payload.size()),
                        version);
}

}  // namespace ptyvisor::protocol
