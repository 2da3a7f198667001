#include "protocol/frame.h"

#include <stdexcept>

#include "protocol/screen_payloads.h"

namespace ptyvisor::protocol {

PTYVISOR_WIRE_CHECK_ENUMS();
static_assert(kMaxScreenPayloadSize == spec_of(FrameType::Screen).max_payload,
              "screen_payloads.h disagrees with protocol.json on SCREEN's bound");
// What the code assumes of the named bounds above: a description that breaks it does not build.
static_assert(spec_of(FrameType::Output).max_payload == kMaxIoPayloadSize);
static_assert(spec_of(FrameType::Send).max_payload == kSessionIdLength + kMaxIoPayloadSize);
static_assert(spec_of(FrameType::Started).max_payload == kMaxControlPayloadSize &&
              spec_of(FrameType::Signal).max_payload == kMaxControlPayloadSize &&
              spec_of(FrameType::Exit).max_payload == kMaxControlPayloadSize &&
              spec_of(FrameType::Error).max_payload == kMaxControlPayloadSize);

namespace {

// A FrameType value may come from a cast of any byte: only those of the description have one.
const wire::FrameSpec* find_spec(FrameType type) {
    const auto number = static_cast<std::size_t>(type);
    if (number < 1 || number > wire::kFrames.size()) return nullptr;
    return &wire::kFrames[number - 1];
}

}  // namespace

std::string_view to_string(FrameType type) {
    const auto* spec = find_spec(type);
    return spec ? spec->name : "UNKNOWN";
}

bool is_known(std::uint8_t type, std::uint8_t version) {
    if (version < kOldestVersion || version > kVersion) return false;
    return type >= 1 && type <= wire::kLastTypeOfVersion[version - kOldestVersion];
}

std::uint32_t min_payload(FrameType type) {
    const auto* spec = find_spec(type);
    return spec ? spec->min_payload : 0;
}

std::uint32_t max_payload(FrameType type) {
    const auto* spec = find_spec(type);
    return spec ? spec->max_payload : 0;
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
