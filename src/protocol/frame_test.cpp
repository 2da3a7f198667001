// Frames and the stream decoder: encode_frame + FrameDecoder round trips, every bound at its
// largest valid value and one byte over, hostile headers, arbitrary splits, and the decoder
// staying failed once framing is lost.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/frame.h"
#include "protocol/frame_decoder.h"

namespace ptyvisor::protocol {
namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr FrameType kAllTypes[] = {
    FrameType::Start,  FrameType::Started, FrameType::Input,         FrameType::Output,
    FrameType::Resize, FrameType::Signal,  FrameType::Stop,          FrameType::Exit,
    FrameType::Error,  FrameType::StatusRequest, FrameType::Status,
    FrameType::Attach, FrameType::Attached, FrameType::Detach, FrameType::Detached, FrameType::List,
    FrameType::Sessions, FrameType::Read, FrameType::Log, FrameType::Wait, FrameType::Waited,
    FrameType::Kill, FrameType::Killed, FrameType::Send, FrameType::Sent, FrameType::Dropped,
    FrameType::Snapshot, FrameType::Screen,
};

Bytes header(std::uint8_t m0, std::uint8_t m1, std::uint8_t version, std::uint8_t type,
             std::uint32_t length) {
    return {m0,
            m1,
            version,
            type,
            static_cast<std::uint8_t>(length >> 24),
            static_cast<std::uint8_t>(length >> 16),
            static_cast<std::uint8_t>(length >> 8),
            static_cast<std::uint8_t>(length)};
}

Bytes header(FrameType type, std::uint32_t length) {
    return header(kMagic0, kMagic1, kVersion, static_cast<std::uint8_t>(type), length);
}

// A plausible payload for each type, of the type's minimum size at least.
std::string sample_payload(FrameType type) {
    switch (type) {
        case FrameType::Start:
            return R"({"argv":["ls"],"env":[],"cwd_dev":1,"cwd_ino":2,"rows":24,"cols":80})";
        case FrameType::Started: return R"({"unit":"ptyvisor-x.service","pid":42})";
        case FrameType::Input: return "ls\r";
        case FrameType::Output: return std::string("\x1b[0m\0out", 8);
        case FrameType::Resize: return R"({"rows":50,"cols":132})";
        case FrameType::Signal: return R"({"signal":2})";
        case FrameType::Stop:
        case FrameType::StatusRequest: return "";
        case FrameType::Exit: return R"({"status":"exited","code":0,"reason":"exited"})";
        case FrameType::Error: return R"({"code":"busy","message":"no slot"})";
        case FrameType::Status: return R"({"version":"0.1.0","sessions":[]})";
        case FrameType::Attach: return R"({"id":"0123456789abcdef0123456789abcdef","from":"start"})";
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
        case FrameType::Screen:
        case FrameType::CommandList:
        case FrameType::Executed:
        case FrameType::Event:
        case FrameType::Controller:
        case FrameType::Refused:
        case FrameType::Cast: return R"({"offset":0})";
        case FrameType::Control: return R"({"take":true})";
        case FrameType::Recording:
        case FrameType::Snapshot:
        case FrameType::Commands:
        case FrameType::Watch: return R"({"id":"0123456789abcdef0123456789abcdef"})";
        case FrameType::Exec: return R"({"id":"0123456789abcdef0123456789abcdef","command":"true"})";
        case FrameType::Send: return "0123456789abcdef0123456789abcdefls\r";
        case FrameType::Detach:
        case FrameType::List: return "";
    }
    return "";
}

Bytes to_bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

void feed(FrameDecoder& d, const Bytes& b) { d.feed(std::span<const std::uint8_t>(b)); }

// Feeds `bytes` to a fresh decoder and expects exactly one Ready frame, then NeedMore.
Frame decode_one(const Bytes& bytes) {
    FrameDecoder d;
    feed(d, bytes);
    Frame f{};
    EXPECT_EQ(d.next(f), FrameDecoder::Status::Ready);
    Frame extra{};
    EXPECT_EQ(d.next(extra), FrameDecoder::Status::NeedMore);
    EXPECT_EQ(d.buffered(), 0u);
    EXPECT_FALSE(d.mid_frame());
    return f;
}

// Feeds `bytes` to a fresh decoder and returns the error it fails with (expects failure).
ErrorCode decode_error_of(const Bytes& bytes) {
    FrameDecoder d;
    feed(d, bytes);
    Frame f{};
    EXPECT_EQ(d.next(f), FrameDecoder::Status::Failed);
    return d.error();
}

std::string type_name(const ::testing::TestParamInfo<FrameType>& param) {
    return std::string(to_string(param.param));
}

// ---------------------------------------------------------------------------------------------
// Round trips

class FrameRoundTrip : public ::testing::TestWithParam<FrameType> {};

TEST_P(FrameRoundTrip, EncodeThenDecodeGivesTheSameFrame) {
    const FrameType type = GetParam();
    const std::string payload = sample_payload(type);
    const Bytes wire = encode_frame(type, payload);
    ASSERT_EQ(wire.size(), kHeaderSize + payload.size());
    EXPECT_EQ(Bytes(wire.begin(), wire.begin() + kHeaderSize),
              header(type, static_cast<std::uint32_t>(payload.size())));
    const Frame f = decode_one(wire);
    EXPECT_EQ(f.type, type);
    EXPECT_EQ(f.text(), payload);
}

TEST_P(FrameRoundTrip, SpanAndStringOverloadsAgree) {
    const FrameType type = GetParam();
    const Bytes payload = to_bytes(sample_payload(type));
    EXPECT_EQ(encode_frame(type, std::span<const std::uint8_t>(payload)),
              encode_frame(type, sample_payload(type)));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, FrameRoundTrip, ::testing::ValuesIn(kAllTypes),
                         type_name);

TEST(FrameType, NamesAndKnownRange) {
    EXPECT_EQ(to_string(FrameType::Start), "START");
    EXPECT_EQ(to_string(FrameType::Started), "STARTED");
    EXPECT_EQ(to_string(FrameType::Input), "INPUT");
    EXPECT_EQ(to_string(FrameType::Output), "OUTPUT");
    EXPECT_EQ(to_string(FrameType::Resize), "RESIZE");
    EXPECT_EQ(to_string(FrameType::Signal), "SIGNAL");
    EXPECT_EQ(to_string(FrameType::Stop), "STOP");
    EXPECT_EQ(to_string(FrameType::Exit), "EXIT");
    EXPECT_EQ(to_string(FrameType::Error), "ERROR");
    EXPECT_EQ(to_string(FrameType::StatusRequest), "STATUS_REQUEST");
    EXPECT_EQ(to_string(FrameType::Status), "STATUS");
    EXPECT_FALSE(is_known(0));
    for (std::uint8_t t = 1; t <= 11; ++t) EXPECT_TRUE(is_known(t, 1)) << int{t};
    EXPECT_FALSE(is_known(12, 1));
    for (std::uint8_t t = 1; t <= 26; ++t) EXPECT_TRUE(is_known(t, 2)) << int{t};
    EXPECT_FALSE(is_known(27, 2));
    EXPECT_FALSE(is_known(255));
    EXPECT_EQ(to_string(FrameType::Attach), "ATTACH");
    EXPECT_EQ(to_string(FrameType::Dropped), "DROPPED");
}

TEST(FrameType, WireValuesAreStable) {
    EXPECT_EQ(static_cast<int>(FrameType::Start), 1);
    EXPECT_EQ(static_cast<int>(FrameType::Started), 2);
    EXPECT_EQ(static_cast<int>(FrameType::Input), 3);
    EXPECT_EQ(static_cast<int>(FrameType::Output), 4);
    EXPECT_EQ(static_cast<int>(FrameType::Resize), 5);
    EXPECT_EQ(static_cast<int>(FrameType::Signal), 6);
    EXPECT_EQ(static_cast<int>(FrameType::Stop), 7);
    EXPECT_EQ(static_cast<int>(FrameType::Exit), 8);
    EXPECT_EQ(static_cast<int>(FrameType::Error), 9);
    EXPECT_EQ(static_cast<int>(FrameType::StatusRequest), 10);
    EXPECT_EQ(static_cast<int>(FrameType::Status), 11);
    EXPECT_EQ(static_cast<int>(FrameType::Attach), 12);
    EXPECT_EQ(static_cast<int>(FrameType::Detach), 14);
    EXPECT_EQ(static_cast<int>(FrameType::List), 16);
    EXPECT_EQ(static_cast<int>(FrameType::Read), 18);
    EXPECT_EQ(static_cast<int>(FrameType::Wait), 20);
    EXPECT_EQ(static_cast<int>(FrameType::Kill), 22);
    EXPECT_EQ(static_cast<int>(FrameType::Send), 24);
    EXPECT_EQ(static_cast<int>(FrameType::Dropped), 26);
}

// The worked examples in docs/protocol.md (version 1 frames).
TEST(FrameWire, DocumentedExamples) {
    EXPECT_EQ(encode_frame(FrameType::Stop, std::string_view{}, 1),
              (Bytes{0x50, 0x56, 0x01, 0x07, 0x00, 0x00, 0x00, 0x00}));
    EXPECT_EQ(encode_frame(FrameType::Input, std::string_view{"ls\r"}, 1),
              (Bytes{0x50, 0x56, 0x01, 0x03, 0x00, 0x00, 0x00, 0x03, 0x6c, 0x73, 0x0d}));
    const Bytes resize = encode_frame(FrameType::Resize, std::string_view{R"({"rows":24,"cols":80})"}, 1);
    EXPECT_EQ(Bytes(resize.begin(), resize.begin() + kHeaderSize),
              (Bytes{0x50, 0x56, 0x01, 0x05, 0x00, 0x00, 0x00, 0x15}));
}

TEST(FrameWire, LengthIsBigEndian) {
    std::array<std::uint8_t, kHeaderSize> h{};
    write_header(FrameType::Start, 0x00030201, h);
    EXPECT_EQ(h[4], 0x00);
    EXPECT_EQ(h[5], 0x03);
    EXPECT_EQ(h[6], 0x02);
    EXPECT_EQ(h[7], 0x01);
    const auto r = parse_header(h);
    ASSERT_TRUE(r.header);
    EXPECT_EQ(r.header->length, 0x00030201u);
    EXPECT_EQ(r.header->type, FrameType::Start);
}

// ---------------------------------------------------------------------------------------------
// Bounds

TEST(FrameBounds, DeclaredConstants) {
    EXPECT_EQ(kMaxPayloadSize, 256u * 1024u);
    EXPECT_EQ(kMaxIoPayloadSize, 64u * 1024u);
    EXPECT_EQ(kMaxControlPayloadSize, 4u * 1024u);
    EXPECT_EQ(max_payload(FrameType::Start), kMaxPayloadSize);
    EXPECT_EQ(max_payload(FrameType::Status), kMaxPayloadSize);
    EXPECT_EQ(max_payload(FrameType::Input), kMaxIoPayloadSize);
    EXPECT_EQ(max_payload(FrameType::Output), kMaxIoPayloadSize);
    for (auto t : {FrameType::Started, FrameType::Resize, FrameType::Signal, FrameType::Exit,
                   FrameType::Error})
        EXPECT_EQ(max_payload(t), kMaxControlPayloadSize) << to_string(t);
    EXPECT_EQ(max_payload(FrameType::Stop), 0u);
    EXPECT_EQ(max_payload(FrameType::StatusRequest), 0u);
    EXPECT_EQ(min_payload(FrameType::Input), 1u);
    EXPECT_EQ(min_payload(FrameType::Output), 1u);
    EXPECT_EQ(min_payload(FrameType::Stop), 0u);
    EXPECT_EQ(min_payload(FrameType::StatusRequest), 0u);
    for (auto t : {FrameType::Start, FrameType::Started, FrameType::Resize, FrameType::Signal,
                   FrameType::Exit, FrameType::Error, FrameType::Status})
        EXPECT_EQ(min_payload(t), 2u) << to_string(t);
}

class FrameBounds : public ::testing::TestWithParam<FrameType> {};

TEST_P(FrameBounds, LargestValidPayloadDecodes) {
    const FrameType type = GetParam();
    const Bytes payload(max_payload(type), 'x');
    const Frame f = decode_one(encode_frame(type, std::span<const std::uint8_t>(payload)));
    EXPECT_EQ(f.type, type);
    EXPECT_EQ(f.payload, payload);
}

TEST_P(FrameBounds, SmallestValidPayloadDecodes) {
    const FrameType type = GetParam();
    const Bytes payload(min_payload(type), 'x');
    const Frame f = decode_one(encode_frame(type, std::span<const std::uint8_t>(payload)));
    EXPECT_EQ(f.type, type);
    EXPECT_EQ(f.payload, payload);
}

TEST_P(FrameBounds, OneByteOverIsRefusedByEncoderAndDecoder) {
    const FrameType type = GetParam();
    const std::uint32_t over = max_payload(type) + 1;
    const Bytes payload(over, 'x');
    EXPECT_THROW((void)encode_frame(type, std::span<const std::uint8_t>(payload)),
                 std::length_error);
    // The decoder refuses on the header alone, before any payload byte is present.
    EXPECT_EQ(decode_error_of(header(type, over)), ErrorCode::TooBig);
    EXPECT_EQ(decode_error_of(header(type, 0xffffffffu)), ErrorCode::TooBig);
}

class FrameLowerBound : public ::testing::TestWithParam<FrameType> {};

TEST_P(FrameLowerBound, OneByteUnderIsRefused) {
    const FrameType type = GetParam();
    ASSERT_GT(min_payload(type), 0u);
    const Bytes payload(min_payload(type) - 1, 'x');
    EXPECT_THROW((void)encode_frame(type, std::span<const std::uint8_t>(payload)),
                 std::length_error);
    EXPECT_EQ(decode_error_of(header(type, min_payload(type) - 1)), ErrorCode::BadFrame);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, FrameBounds, ::testing::ValuesIn(kAllTypes),
                         type_name);
// Every type but the two empty ones (STOP, STATUS_REQUEST) has a lower bound.
INSTANTIATE_TEST_SUITE_P(TypesWithAMinimum, FrameLowerBound,
                         ::testing::Values(FrameType::Start, FrameType::Started, FrameType::Input,
                                           FrameType::Output, FrameType::Resize, FrameType::Signal,
                                           FrameType::Exit, FrameType::Error, FrameType::Status),
                         type_name);

TEST(FrameBoundsNamed, StartAtKMaxPayloadSize) {
    FrameDecoder d;
    feed(d, header(FrameType::Start, kMaxPayloadSize));
    Frame f{};
    EXPECT_EQ(d.next(f), FrameDecoder::Status::NeedMore);
    EXPECT_EQ(decode_error_of(header(FrameType::Start, kMaxPayloadSize + 1)), ErrorCode::TooBig);
}

TEST(FrameBoundsNamed, InputOutputAtKMaxIoPayloadSize) {
    for (auto t : {FrameType::Input, FrameType::Output}) {
        FrameDecoder d;
        feed(d, header(t, kMaxIoPayloadSize));
        Frame f{};
        EXPECT_EQ(d.next(f), FrameDecoder::Status::NeedMore);
        EXPECT_EQ(decode_error_of(header(t, kMaxIoPayloadSize + 1)), ErrorCode::TooBig);
    }
}

TEST(FrameBoundsNamed, InputNeedsOneByte) {
    EXPECT_EQ(decode_error_of(header(FrameType::Input, 0)), ErrorCode::BadFrame);
    const Frame f = decode_one(encode_frame(FrameType::Input, std::string_view{"\x03"}));
    EXPECT_EQ(f.type, FrameType::Input);
    EXPECT_EQ(f.payload, Bytes{0x03});
}

TEST(FrameBoundsNamed, StopIsEmpty) {
    const Frame f = decode_one(header(FrameType::Stop, 0));
    EXPECT_EQ(f.type, FrameType::Stop);
    EXPECT_TRUE(f.payload.empty());
    EXPECT_EQ(decode_error_of(header(FrameType::Stop, 1)), ErrorCode::TooBig);
    EXPECT_THROW((void)encode_frame(FrameType::Stop, std::string_view{"x"}), std::length_error);
}

// ---------------------------------------------------------------------------------------------
// Hostile headers

TEST(FrameHeader, BadMagic) {
    EXPECT_EQ(decode_error_of(header('X', kMagic1, kVersion, 7, 0)), ErrorCode::BadFrame);
    EXPECT_EQ(decode_error_of(header(kMagic0, 'X', kVersion, 7, 0)), ErrorCode::BadFrame);
    EXPECT_EQ(decode_error_of(header('V', 'P', kVersion, 7, 0)), ErrorCode::BadFrame);
    EXPECT_EQ(decode_error_of(header(0, 0, 0, 0, 0)), ErrorCode::BadFrame);
    // Text that a confused client might send.
    EXPECT_EQ(decode_error_of(to_bytes("GET / HTTP/1.1\r\n")), ErrorCode::BadFrame);
}

TEST(FrameHeader, BadVersion) {
    for (std::uint8_t v : std::initializer_list<std::uint8_t>{0, wire::kNewestVersion + 1, 0x7f, 0xff})
        EXPECT_EQ(decode_error_of(header(kMagic0, kMagic1, v, 7, 0)),
                  ErrorCode::UnsupportedVersion)
            << int{v};
}

TEST(FrameHeader, MagicIsCheckedBeforeVersion) {
    EXPECT_EQ(decode_error_of(header('X', kMagic1, 9, 7, 0)), ErrorCode::BadFrame);
}

TEST(FrameHeader, UnknownType) {
    for (std::uint8_t t : std::initializer_list<std::uint8_t>{0, 29, 30, 0x80, 0xff})
        EXPECT_EQ(decode_error_of(header(kMagic0, kMagic1, kVersion, t, 0)), ErrorCode::BadFrame)
            << int{t};
}

// A version 1 connection knows nothing of version 2's frames: they are unknown types there.
TEST(FrameHeader, VersionTwoTypesAreUnknownInVersionOne) {
    for (std::uint8_t t = 12; t <= 26; ++t) {
        EXPECT_EQ(decode_error_of(header(kMagic0, kMagic1, 1, t, 2)), ErrorCode::BadFrame) << int{t};
        EXPECT_TRUE(is_known(t, 2)) << int{t};
        EXPECT_FALSE(is_known(t, 1)) << int{t};
    }
}

// Nor does a version 2 connection know version 3's.
TEST(FrameHeader, VersionThreeTypesAreUnknownInVersionTwo) {
    for (std::uint8_t t = 27; t <= 28; ++t) {
        EXPECT_EQ(decode_error_of(header(kMagic0, kMagic1, 2, t, 2)), ErrorCode::BadFrame) << int{t};
        EXPECT_TRUE(is_known(t, 3)) << int{t};
        EXPECT_FALSE(is_known(t, 2)) << int{t};
    }
}

TEST(FrameHeader, BothVersionsAreReadAndTheFrameSaysWhich) {
    for (std::uint8_t v : {std::uint8_t{1}, std::uint8_t{2}, std::uint8_t{3}}) {
        const Frame f = decode_one(encode_frame(FrameType::Stop, std::string_view{}, v));
        EXPECT_EQ(f.version, v);
    }
}

TEST(FrameHeader, ParseHeaderDirectly) {
    const Bytes ok = header(FrameType::Resize, 20);
    const auto r = parse_header(std::span<const std::uint8_t, kHeaderSize>(ok.data(), kHeaderSize));
    ASSERT_TRUE(r.header);
    EXPECT_EQ(r.header->type, FrameType::Resize);
    EXPECT_EQ(r.header->length, 20u);

    const Bytes big = header(FrameType::Resize, kMaxControlPayloadSize + 1);
    const auto r2 =
        parse_header(std::span<const std::uint8_t, kHeaderSize>(big.data(), kHeaderSize));
    EXPECT_FALSE(r2.header);
    EXPECT_EQ(r2.error, ErrorCode::TooBig);
}

// ---------------------------------------------------------------------------------------------
// Splits

TEST(FrameSplit, HeaderByteByByte) {
    const std::string payload = sample_payload(FrameType::Resize);
    const Bytes wire = encode_frame(FrameType::Resize, payload);
    FrameDecoder d;
    Frame f{};
    for (std::size_t i = 0; i + 1 < wire.size(); ++i) {
        d.feed(std::span<const std::uint8_t>(&wire[i], 1));
        ASSERT_EQ(d.next(f), FrameDecoder::Status::NeedMore) << "after byte " << i;
        EXPECT_TRUE(d.mid_frame());
        EXPECT_EQ(d.buffered(), i + 1);
    }
    d.feed(std::span<const std::uint8_t>(&wire.back(), 1));
    ASSERT_EQ(d.next(f), FrameDecoder::Status::Ready);
    EXPECT_EQ(f.type, FrameType::Resize);
    EXPECT_EQ(f.text(), payload);
    EXPECT_FALSE(d.mid_frame());
}

TEST(FrameSplit, HostileHeaderFailsAsSoonAsItIsComplete) {
    const Bytes h = header(FrameType::Input, kMaxIoPayloadSize + 1);
    FrameDecoder d;
    Frame f{};
    for (std::size_t i = 0; i + 1 < h.size(); ++i) {
        d.feed(std::span<const std::uint8_t>(&h[i], 1));
        ASSERT_EQ(d.next(f), FrameDecoder::Status::NeedMore);
    }
    d.feed(std::span<const std::uint8_t>(&h.back(), 1));
    EXPECT_EQ(d.next(f), FrameDecoder::Status::Failed);
    EXPECT_EQ(d.error(), ErrorCode::TooBig);
    EXPECT_EQ(d.buffered(), 0u);
}

TEST(FrameSplit, PayloadSplit) {
    const Bytes payload(1000, 'q');
    const Bytes wire = encode_frame(FrameType::Output, std::span<const std::uint8_t>(payload));
    FrameDecoder d;
    Frame f{};
    d.feed(std::span<const std::uint8_t>(wire.data(), kHeaderSize + 1));
    EXPECT_EQ(d.next(f), FrameDecoder::Status::NeedMore);
    d.feed(std::span<const std::uint8_t>(wire.data() + kHeaderSize + 1, 499));
    EXPECT_EQ(d.next(f), FrameDecoder::Status::NeedMore);
    EXPECT_EQ(d.buffered(), kHeaderSize + 500);
    d.feed(std::span<const std::uint8_t>(wire.data() + kHeaderSize + 500, 500));
    ASSERT_EQ(d.next(f), FrameDecoder::Status::Ready);
    EXPECT_EQ(f.type, FrameType::Output);
    EXPECT_EQ(f.payload, payload);
}

TEST(FrameSplit, SeveralFramesInOneFeed) {
    Bytes wire;
    std::vector<FrameType> order;
    for (FrameType t : kAllTypes) {
        const auto one = encode_frame(t, sample_payload(t));
        wire.insert(wire.end(), one.begin(), one.end());
        order.push_back(t);
    }
    FrameDecoder d;
    feed(d, wire);
    Frame f{};
    for (FrameType t : order) {
        ASSERT_EQ(d.next(f), FrameDecoder::Status::Ready) << to_string(t);
        EXPECT_EQ(f.type, t);
        EXPECT_EQ(f.text(), sample_payload(t));
    }
    EXPECT_EQ(d.next(f), FrameDecoder::Status::NeedMore);
    EXPECT_EQ(d.buffered(), 0u);
}

TEST(FrameSplit, FramesThenAPartialThenTheRest) {
    const Bytes a = encode_frame(FrameType::Input, std::string_view{"abc"});
    const Bytes b = encode_frame(FrameType::Input, std::string_view{"defgh"});
    Bytes wire = a;
    wire.insert(wire.end(), b.begin(), b.begin() + 5);  // b's header cut in the middle
    FrameDecoder d;
    feed(d, wire);
    Frame f{};
    ASSERT_EQ(d.next(f), FrameDecoder::Status::Ready);
    EXPECT_EQ(f.text(), "abc");
    EXPECT_EQ(d.next(f), FrameDecoder::Status::NeedMore);
    EXPECT_EQ(d.buffered(), 5u);
    d.feed(std::span<const std::uint8_t>(b.data() + 5, b.size() - 5));
    ASSERT_EQ(d.next(f), FrameDecoder::Status::Ready);
    EXPECT_EQ(f.text(), "defgh");
    EXPECT_EQ(d.next(f), FrameDecoder::Status::NeedMore);
}

TEST(FrameSplit, RandomSplitsOfARandomStream) {
    std::mt19937 rng(12345);  // fixed seed: the test is deterministic
    for (int round = 0; round < 50; ++round) {
        std::vector<Frame> sent;
        Bytes wire;
        const int count = 1 + static_cast<int>(rng() % 20);
        for (int i = 0; i < count; ++i) {
            const FrameType t = kAllTypes[rng() % std::size(kAllTypes)];
            const std::uint32_t lo = min_payload(t);
            const std::uint32_t hi = std::min<std::uint32_t>(max_payload(t), 3000);
            const std::uint32_t n = lo + (hi > lo ? static_cast<std::uint32_t>(rng() % (hi - lo + 1)) : 0);
            Bytes payload(n);
            for (auto& byte : payload) byte = static_cast<std::uint8_t>(rng());
            const auto one = encode_frame(t, std::span<const std::uint8_t>(payload));
            wire.insert(wire.end(), one.begin(), one.end());
            sent.push_back(Frame{t, kVersion, std::move(payload)});
        }
        FrameDecoder d;
        std::vector<Frame> got;
        std::size_t at = 0;
        while (at < wire.size()) {
            const std::size_t chunk =
                std::min<std::size_t>(wire.size() - at, 1 + rng() % 700);
            d.feed(std::span<const std::uint8_t>(wire.data() + at, chunk));
            at += chunk;
            Frame f{};
            FrameDecoder::Status s;
            while ((s = d.next(f)) == FrameDecoder::Status::Ready) got.push_back(f);
            ASSERT_EQ(s, FrameDecoder::Status::NeedMore);
        }
        ASSERT_EQ(got.size(), sent.size()) << "round " << round;
        for (std::size_t i = 0; i < sent.size(); ++i) {
            EXPECT_EQ(got[i].type, sent[i].type) << "round " << round << " frame " << i;
            EXPECT_EQ(got[i].payload, sent[i].payload) << "round " << round << " frame " << i;
        }
        EXPECT_EQ(d.buffered(), 0u);
    }
}

// ---------------------------------------------------------------------------------------------
// Failure is final

TEST(FrameFailure, DecoderStaysFailed) {
    FrameDecoder d;
    feed(d, header(kMagic0, kMagic1, wire::kNewestVersion + 1, 7, 0));
    Frame f{};
    ASSERT_EQ(d.next(f), FrameDecoder::Status::Failed);
    ASSERT_EQ(d.error(), ErrorCode::UnsupportedVersion);
    EXPECT_EQ(d.buffered(), 0u);

    // A perfectly valid frame afterwards changes nothing.
    feed(d, encode_frame(FrameType::Stop, std::string_view{}));
    EXPECT_EQ(d.buffered(), 0u);
    EXPECT_EQ(d.next(f), FrameDecoder::Status::Failed);
    EXPECT_EQ(d.next(f), FrameDecoder::Status::Failed);
    EXPECT_EQ(d.error(), ErrorCode::UnsupportedVersion);
}

TEST(FrameFailure, GoodFrameThenBadFrameInOneFeed) {
    Bytes wire = encode_frame(FrameType::Input, std::string_view{"ok"});
    const Bytes bad = header(FrameType::Resize, kMaxControlPayloadSize + 1);
    wire.insert(wire.end(), bad.begin(), bad.end());
    const Bytes good = encode_frame(FrameType::Stop, std::string_view{});
    wire.insert(wire.end(), good.begin(), good.end());
    FrameDecoder d;
    feed(d, wire);
    Frame f{};
    ASSERT_EQ(d.next(f), FrameDecoder::Status::Ready);
    EXPECT_EQ(f.text(), "ok");
    EXPECT_EQ(d.next(f), FrameDecoder::Status::Failed);
    EXPECT_EQ(d.error(), ErrorCode::TooBig);
    EXPECT_EQ(d.next(f), FrameDecoder::Status::Failed);
    EXPECT_EQ(d.error(), ErrorCode::TooBig);
}

TEST(FrameFailure, EmptyFeedIsHarmless) {
    FrameDecoder d;
    d.feed({});
    Frame f{};
    EXPECT_EQ(d.next(f), FrameDecoder::Status::NeedMore);
    EXPECT_FALSE(d.mid_frame());
}

}  // namespace
}  // namespace ptyvisor::protocol
