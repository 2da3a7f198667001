#include "server/admission.h"

#include <gtest/gtest.h>

namespace ptyvisor::server {
namespace {

Limits small_limits() {
    Limits l;
    l.max_unauthenticated = 4;
    l.max_unauthenticated_per_peer = 2;
    l.max_sessions = 2;
    l.admissions_per_minute = 3;
    return l;
}

TEST(Admission, CapsHandshakesPerPeer) {
    Admission a(small_limits());
    EXPECT_EQ(a.enter_handshake(100), Admission::Handshake::Admitted);
    EXPECT_EQ(a.enter_handshake(100), Admission::Handshake::Admitted);
    EXPECT_EQ(a.enter_handshake(100), Admission::Handshake::Refused);
    a.leave_handshake(100);
    EXPECT_EQ(a.enter_handshake(100), Admission::Handshake::Admitted);
}

// What the listener asks before it pins a peer: true exactly when enter_handshake() would
// refuse the peer for its own share, and never for a peer holding nothing.
TEST(Admission, HoldsAllItsHandshakesMatchesThePerPeerRefusal) {
    Admission a(small_limits());
    EXPECT_FALSE(a.holds_all_its_handshakes(100));
    ASSERT_EQ(a.enter_handshake(100), Admission::Handshake::Admitted);
    EXPECT_FALSE(a.holds_all_its_handshakes(100));
    ASSERT_EQ(a.enter_handshake(100), Admission::Handshake::Admitted);
    EXPECT_TRUE(a.holds_all_its_handshakes(100));
    EXPECT_EQ(a.enter_handshake(100), Admission::Handshake::Refused);
    EXPECT_FALSE(a.holds_all_its_handshakes(200));
    a.leave_handshake(100);
    EXPECT_FALSE(a.holds_all_its_handshakes(100));
}

TEST(Admission, NewcomerEvictsTheBusiestPeerWhenFull) {
    Admission a(small_limits());
    ASSERT_EQ(a.enter_handshake(1), Admission::Handshake::Admitted);
    ASSERT_EQ(a.enter_handshake(1), Admission::Handshake::Admitted);
    ASSERT_EQ(a.enter_handshake(2), Admission::Handshake::Admitted);
    ASSERT_EQ(a.enter_handshake(3), Admission::Handshake::Admitted);
    // Full. The agent (pid 9) holds nothing; pid 1 holds two: it gives one up.
    EXPECT_EQ(a.enter_handshake(9), Admission::Handshake::AdmittedEvicting);
    EXPECT_EQ(a.evict_candidate(), 1);
    a.leave_handshake(1);  // what the server does when it evicts
    // Now 1, 2, 3 and 9 hold one each: nobody holds more than a newcomer's fair share.
    EXPECT_EQ(a.enter_handshake(4), Admission::Handshake::Refused);
}

TEST(Admission, LeaveOfUnknownPeerChangesNothing) {
    Admission a(small_limits());
    a.leave_handshake(42);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(a.enter_handshake(10 + i), Admission::Handshake::Admitted);
    EXPECT_EQ(a.enter_handshake(99), Admission::Handshake::Refused);
}

TEST(Admission, SessionSlotsAreBounded) {
    Admission a(small_limits());
    EXPECT_TRUE(a.reserve_session());
    EXPECT_TRUE(a.reserve_session());
    EXPECT_FALSE(a.reserve_session());
    a.release_session();
    EXPECT_TRUE(a.reserve_session());
    EXPECT_EQ(a.sessions(), 2u);
}

TEST(Admission, RateRefillsOverAMinute) {
    Admission a(small_limits());
    const std::uint64_t t0 = 1'000'000;
    EXPECT_TRUE(a.take_admission(t0));
    EXPECT_TRUE(a.take_admission(t0));
    EXPECT_TRUE(a.take_admission(t0));
    EXPECT_FALSE(a.take_admission(t0));
    EXPECT_EQ(a.counters().rate_limited, 1u);
    // 3 per minute: one token every 20 s.
    EXPECT_FALSE(a.take_admission(t0 + 19'000'000));
    EXPECT_TRUE(a.take_admission(t0 + 40'000'000));
}

TEST(Admission, CountsRejectionsByCode) {
    Admission a(small_limits());
    a.count_rejected(protocol::ErrorCode::NotAllowed);
    a.count_rejected(protocol::ErrorCode::NotAllowed);
    a.count_rejected(protocol::ErrorCode::Busy);
    EXPECT_EQ(a.counters().rejected["not_allowed"], 2u);
    EXPECT_EQ(a.counters().rejected["busy"], 1u);
}

// For metrics: STARTs by result, and sessions ended by reason with the bytes they relayed.
TEST(Admission, CountsStartsByResultAndEndsByReason) {
    Admission a(small_limits());
    a.count_start(std::nullopt);
    a.count_start(std::nullopt);
    a.count_start(protocol::ErrorCode::StartFailed);
    EXPECT_EQ(a.counters().starts, (std::map<std::string, std::uint64_t>{{"started", 2}, {"start_failed", 1}}));
    a.count_ended("exited", 10, 100);
    a.count_ended("stopped", 1, 2);
    a.count_ended("exited", 5, 50);
    EXPECT_EQ(a.counters().ended, (std::map<std::string, std::uint64_t>{{"exited", 2}, {"stopped", 1}}));
    EXPECT_EQ(a.counters().ended_bytes_in, 16u);
    EXPECT_EQ(a.counters().ended_bytes_out, 152u);
}

}  // namespace
}  // namespace ptyvisor::server
