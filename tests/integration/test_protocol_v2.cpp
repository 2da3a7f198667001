// A client written for protocol version 2 keeps working against this version 3 server,
// unchanged: it speaks version 2 frames only and gets version 2 frames only
// (docs/protocol.md section 8); version 3's frames are unknown types in its connection; and
// the daemon does not answer its session's terminal queries (a version 2 client that relays
// a terminal has that terminal answer, as it always did: never both).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/session_payloads.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;

constexpr Millis kReply{10000};
constexpr std::uint8_t kV2 = 2;

std::vector<std::uint8_t> v2_frame(FrameType type, const std::string& payload) {
    return protocol::encode_frame(type, payload, kV2);
}

class ProtocolV2 : public EndToEnd {};

TEST_F(ProtocolV2, AVersionTwoDetachedSessionAttachAndList) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    UniqueFd cwd = open_work_dir();
    auto start = RawClient::start_request({"sh", "-c", "echo v2-ready; exec sleep 60"}, session_env(), cwd.get());
    start.detach = true;
    const std::string payload = protocol::encode(start);
    ASSERT_EQ(payload.find("terminal"), std::string::npos);
    ASSERT_EQ(c->send(v2_frame(FrameType::Start, payload), {cwd.get()}), 0);
    auto in = c->next(kReply);
    ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
    ASSERT_EQ(in.frame.type, FrameType::Started);
    EXPECT_EQ(in.frame.version, kV2);
    const auto started = protocol::decode_started(in.frame.text());
    ASSERT_TRUE(started);

    auto list = connect_as_account();
    ASSERT_EQ(list->send(v2_frame(FrameType::List, "")), 0);
    auto sessions = list->next(kReply, 1 << 20);
    ASSERT_EQ(sessions.frame.type, FrameType::Sessions) << sessions.describe();
    EXPECT_EQ(sessions.frame.version, kV2);

    auto attach = connect_as_account();
    const std::string request = R"({"id":")" + started.value->id + R"(","from":"start","role":"observer"})";
    ASSERT_EQ(attach->send(v2_frame(FrameType::Attach, request)), 0);
    std::string output;
    for (;;) {
        auto f = attach->next(kReply);
        ASSERT_EQ(f.kind, Incoming::Kind::Frame) << f.describe();
        EXPECT_EQ(f.frame.version, kV2);
        EXPECT_TRUE(protocol::is_known(static_cast<std::uint8_t>(f.frame.type), kV2));
        if (f.frame.type == FrameType::Output) output.append(f.frame.text());
        if (output.find("v2-ready") != std::string::npos) break;
    }
}

TEST_F(ProtocolV2, SnapshotIsAnUnknownTypeInVersionTwo) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->send(v2_frame(FrameType::Snapshot, R"({"id":"0123456789abcdef0123456789abcdef"})")), 0);
    std::string seen;
    const auto error = c->expect_error(kReply, &seen);
    ASSERT_TRUE(error) << seen;
    EXPECT_EQ(error->code, protocol::ErrorCode::BadFrame);
}

}  // namespace
}  // namespace ptyvisor::itest
