#include "protocol/frame.h"

#include <stdexcept>

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
    }
    return "UNKNOWN";
}

bool is_known(std::uint8_t type) {
    return type >= static_cast<std::uint8_t>(FrameType::Start) &&
           type <= static_cast<std::uint8_t>(FrameType::Status);
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
        case FrameType::Status: return 2;  // "{}" at least
        case FrameType::Stop:
        case FrameType::StatusRequest: return 0;
    }
    return 0;
}

std::uint32_t max_payload(FrameType type) {
    switch (type) {
        case FrameType::Start: return kMaxPayloadSize;
        case FrameType::Status: return kMaxStatusPayloadSize;
        case FrameType::Input:
        case FrameType::Output: return kMaxIoPayloadSize;
        case FrameType::Started:
        case FrameType::Resize:
        case FrameType::Signal:
        case FrameType::Exit:
        case FrameType::Error: return kMaxControlPayloadSize;
        case FrameType::Stop:
        case FrameType::StatusRequest: return 0;
    }
    return 0;
}

HeaderResult parse_header(std::span<const std::uint8_t, kHeaderSize> b) {
    if (b[0] != kMagic0 || b[1] != kMagic1) return {std::nullopt, ErrorCode::BadFrame};
    if (b[2] != kVersion) return {std::nullopt, ErrorCode::UnsupportedVersion};
    if (!is_known(b[3])) return {std::nullopt, ErrorCode::BadFrame};
    const auto type = static_cast<FrameType>(b[3]);
    const std::uint32_t length = (std::uint32_t{b[4]} << 24) | (std::uint32_t{b[5]} << 16) |
                                 (std::uint32_t{b[6]} << 8) | std::uint32_t{b[7]};
    if (length > max_payload(type)) return {std::nullopt, ErrorCode::TooBig};
    if (length < min_payload(type)) return {std::nullopt, ErrorCode::BadFrame};
    return {Header{type, length}, ErrorCode::BadFrame};
}

void write_header(FrameType type, std::uint32_t length, std::span<std::uint8_t, kHeaderSize> out) {
    out[0] = kMagic0;
    out[1] = kMagic1;
    out[2] = kVersion;
    out[3] = static_cast<std::uint8_t>(type);
    out[4] = static_cast<std::uint8_t>(length >> 24);
    out[5] = static_cast<std::uint8_t>(length >> 16);
    out[6] = static_cast<std::uint8_t>(length >> 8);
    out[7] = static_cast<std::uint8_t>(length);
}

std::vector<std::uint8_t> encode_frame(FrameType type, std::span<const std::uint8_t> payload) {
    if (payload.size() > max_payload(type) || payload.size() < min_payload(type))
        throw std::length_error("ptyvisor: payload size out of bounds for " +
                                std::string(to_string(type)));
    std::vector<std::uint8_t> frame(kHeaderSize + payload.size());
    write_header(type, static_cast<std::uint32_t>(payload.size()),
                 std::span<std::uint8_t, kHeaderSize>(frame.data(), kHeaderSize));
    std::copy(payload.begin(), payload.end(), frame.begin() + kHeaderSize);
    return frame;
}

std::vector<std::uint8_t> encode_frame(FrameType type, std::string_view payload) {
    return encode_frame(type, std::span(reinterpret_cast<const std::uint8_t*>(payload.data()),
                                        payload.size()));
}

}  // namespace ptyvisor::protocol
