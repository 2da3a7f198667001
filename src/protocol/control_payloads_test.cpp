#include "protocol/control_payloads.h"

#include <gtest/gtest.h>

namespace ptyvisor::protocol {
namespace {

const std::string kId(32, 'a');

TEST(ControlPayloads, ControlRoundTripsAndNeedsTake) {
    for (const bool take : {true, false}) {
        const auto d = decode_control(encode(ControlRequest{take}));
        ASSERT_TRUE(d) << d.error;
        EXPECT_EQ(d.value->take, take);
    }
    EXPECT_FALSE(decode_control("{}"));
    EXPECT_FALSE(decode_control(R"({"take":1})"));
}

TEST(ControlPayloads, ControllerRoundTripsWithAndWithoutAPerson) {
    ControllerNotice person{ControllerNotice::Kind::Supervisor, 1001, 1700000000123, true};
    const auto d = decode_controller(encode(person));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, person);
    ControllerNotice agent{ControllerNotice::Kind::Agent, std::nullopt, 5, false};
    const std::string text = encode(agent);
    EXPECT_EQ(text.find("uid"), std::string::npos) << text;
    const auto a = decode_controller(text);
    ASSERT_TRUE(a) << a.error;
    EXPECT_EQ(*a.value, agent);
    EXPECT_FALSE(decode_controller(R"({"controller":"robot","since":1,"you":false})"));
}

TEST(ControlPayloads, RefusedRoundTrips) {
    RefusedNotice n{"held_by_supervisor", "a person holds it", "input", 7};
    const auto d = decode_refused(encode(n));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, n);
}

TEST(ControlPayloads, RecordingBoundsItsIdAndItsSize) {
    const auto d = decode_recording(encode(RecordingRequest{kId, 10, 4096}));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(d.value->offset, 10u);
    EXPECT_EQ(d.value->max_bytes, 4096u);
    const auto defaults = decode_recording(R"({"id":")" + kId + R"("})");
    ASSERT_TRUE(defaults) << defaults.error;
    EXPECT_EQ(defaults.value->max_bytes, kDefaultRecordingChunk);
    // A path is never an id: the daemon opens <id>.cast in its own directory.
    EXPECT_FALSE(decode_recording(R"({"id":"../../../../etc/shadow"})"));
    EXPECT_FALSE(decode_recording(R"({"id":")" + kId + R"(","max_bytes":0})"));
    EXPECT_FALSE(decode_recording(R"({"id":")" + kId + R"(","max_bytes":)" + std::to_string(kMaxRecordingChunk + 1) + "}"));
}

TEST(ControlPayloads, CastRoundTrips) {
    CastReply r{kId, 0, 100, 5000};
    const auto d = decode_cast(encode(r));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, r);
}

}  // namespace
}  // namespace ptyvisor::protocol
