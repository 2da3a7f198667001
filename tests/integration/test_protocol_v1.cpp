// A client written for protocol version 1 keeps working against this server, unchanged:
// it speaks version 1 frames only, and gets version 1 frames only, with every member it
// knows (docs/protocol.md section 8). The frames here are built by hand, byte for byte as a
// version 1 client builds them, not with the current encoders' defaults.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/session_payloads.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;

constexpr Millis kReply{10000};
constexpr std::uint8_t kV1 = 1;

std::vector<std::uint8_t> v1_frame(FrameType type, const std::string& payload) {
    return protocol::encode_frame(type, payload, kV1);
}

class ProtocolV1 : public EndToEnd {};

TEST_F(ProtocolV1, AVersionOneSessionRunsAsItAlwaysDid) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    UniqueFd cwd = open_work_dir();
    // START as version 1 wrote it: no `detach`, nothing version 2 knows.
    const auto start = RawClient::start_request({"sh", "-c", "read line; echo got $line; exit 4"}, session_env(), cwd.get());
    const std::string payload = protocol::encode(start);
    ASSERT_EQ(payload.find("detach"), std::string::npos);
    ASSERT_EQ(c->send(v1_frame(FrameType::Start, payload), {cwd.get()}), 0);
    ASSERT_EQ(c->send(v1_frame(FrameType::Input, "hello\n")), 0);
    bool started = false;
    std::string output;
    std::optional<protocol::ExitStatus> exit;
    for (;;) {
        auto in = c->next(kReply);
        if (in.kind == Incoming::Kind::Eof) break;
        ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
        EXPECT_EQ(in.frame.version, kV1) << "a version 1 client got a " << int{in.frame.version} << " frame ("
                                         << protocol::to_string(in.frame.type) << ")";
        EXPECT_TRUE(protocol::is_known(static_cast<std::uint8_t>(in.frame.type), kV1));
        switch (in.frame.type) {
            case FrameType::Started: {
                const auto s = protocol::decode_started(in.frame.text());
                ASSERT_TRUE(s) << s.error;
                EXPECT_FALSE(s.value->unit.empty());
                started = true;
                break;
            }
            case FrameType::Output:
                EXPECT_TRUE(started) << "OUTPUT before STARTED";
                output.append(in.frame.text());
                break;
            case FrameType::Exit: {
                const auto e = protocol::decode_exit(in.frame.text());
                ASSERT_TRUE(e) << e.error;
                exit = *e.value;
                break;
            }
            default: FAIL() << "unexpected " << protocol::to_string(in.frame.type) << ": " << in.frame.text();
        }
    }
    EXPECT_TRUE(started);
    EXPECT_NE(output.find("got hello"), std::string::npos) << output;
    ASSERT_TRUE(exit);
    EXPECT_EQ(exit->code, 4);
}

TEST_F(ProtocolV1, AVersionOneDisconnectStillEndsTheSession) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    UniqueFd cwd = open_work_dir();
    auto start = RawClient::start_request({"sleep", "60"}, session_env(), cwd.get());
    start.detach = true;  // a version 1 connection knows no detach: ignored
    ASSERT_EQ(c->send(v1_frame(FrameType::Start, protocol::encode(start)), {cwd.get()}), 0);
    std::string seen;
    const auto started = c->expect_started(kReply, &seen);
    ASSERT_TRUE(started) << seen;
    // A version 2 observer (root) sees the end: the session was bound to its version 1 client.
    auto o = connect_as(0, 0, {0});
    ASSERT_NE(o, nullptr);
    ASSERT_EQ(o->send_frame(FrameType::Attach, protocol::encode(protocol::AttachRequest{started->id, {}, true, false})), 0);
    auto in = o->next(kReply);
    ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
    ASSERT_EQ(in.frame.type, FrameType::Attached) << in.frame.text();
    c.reset();
    const auto exit = o->read_until_exit(kReply, &seen);
    ASSERT_TRUE(exit) << seen;
    EXPECT_EQ(exit->reason, protocol::ExitReason::Disconnected);
}

TEST_F(ProtocolV1, VersionTwoFramesAreUnknownInAVersionOneConnection) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->send(v1_frame(FrameType::List, "")), 0);
    auto in = c->next(kReply);
    ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
    EXPECT_EQ(in.frame.version, kV1);
    ASSERT_EQ(in.frame.type, FrameType::Error);
    EXPECT_EQ(protocol::decode_error(in.frame.text()).value->code, protocol::ErrorCode::BadFrame);
}

TEST_F(ProtocolV1, AConnectionSpeaksOneVersion) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    UniqueFd cwd = open_work_dir();
    const auto start = RawClient::start_request({"cat"}, session_env(), cwd.get());
    ASSERT_EQ(c->send(v1_frame(FrameType::Start, protocol::encode(start)), {cwd.get()}), 0);
    std::string seen;
    ASSERT_TRUE(c->expect_started(kReply, &seen)) << seen;
    ASSERT_EQ(c->send(protocol::encode_frame(FrameType::Input, std::string("x"), 2)), 0);
    const auto e = c->expect_error(kReply, &seen);
    ASSERT_TRUE(e) << seen;
    EXPECT_EQ(e->code, protocol::ErrorCode::UnsupportedVersion);
}

}  // namespace
}  // namespace ptyvisor::itest
