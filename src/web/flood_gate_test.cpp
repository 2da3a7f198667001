#include "web/flood_gate.h"

#include <gtest/gtest.h>

namespace ptyvisor::web {
namespace {

using namespace std::chrono_literals;
using Mode = FloodGate::Mode;
const FloodGate::Clock::time_point t0{};

FloodGate::Limits limits() {
    FloodGate::Limits l;
    l.burst = 1000;
    l.rate = 10000;  // 10 bytes per ms
    l.interval = 250ms;
    l.quiet_rate = 2000;  // 2 bytes per ms
    return l;
}

TEST(FloodGate, QuietOutputPassesAsBytes) {
    FloodGate g(limits());
    for (int i = 0; i < 100; ++i) EXPECT_TRUE(g.pass(50, t0 + i * 10ms));  // 5 bytes per ms
    EXPECT_EQ(g.mode(), Mode::Streaming);
}

TEST(FloodGate, ABurstUpToTheBucketPasses) {
    FloodGate g(limits());
    EXPECT_TRUE(g.pass(1000, t0));
    EXPECT_FALSE(g.pass(1, t0));
    EXPECT_EQ(g.mode(), Mode::Screen);
}

TEST(FloodGate, AFloodIsBoundedByBurstPlusRateTimesTime) {
    FloodGate g(limits());
    std::size_t passed = 0;
    for (int i = 0; i < 1000; ++i)
        if (g.pass(100, t0 + i * 1ms)) passed += 100;  // 100 bytes per ms: ten times the rate
    EXPECT_LE(passed, 1000u + 10u * 1000u);
    EXPECT_EQ(g.mode(), Mode::Screen);
    EXPECT_FALSE(g.pass(1, t0 + 10s)) << "in Screen mode nothing passes, however long after";
}

TEST(FloodGate, ScreensAreAskedAtMostOncePerInterval) {
    FloodGate g(limits());
    EXPECT_FALSE(g.snapshot_due(t0)) << "streaming: no screen";
    ASSERT_FALSE(g.pass(2000, t0));
    EXPECT_TRUE(g.snapshot_due(t0));
    g.snapshot_asked(t0);
    EXPECT_FALSE(g.snapshot_due(t0 + 300ms)) << "one in flight at a time";
    EXPECT_FALSE(g.snapshot_answered(1'000'000));
    EXPECT_FALSE(g.snapshot_due(t0 + 249ms));
    EXPECT_TRUE(g.snapshot_due(t0 + 250ms));
    EXPECT_EQ(g.next_snapshot_at(), t0 + 250ms);
}

TEST(FloodGate, TheFirstScreenOfAFloodIsNeverFinal) {
    FloodGate g(limits());
    ASSERT_FALSE(g.pass(2000, t0));
    g.snapshot_asked(t0);
    EXPECT_FALSE(g.snapshot_answered(5000));
    EXPECT_EQ(g.mode(), Mode::Screen);
}

TEST(FloodGate, AFloodEndsOnAScreenThatBarelyMoved) {
    FloodGate g(limits());
    ASSERT_FALSE(g.pass(2000, t0));
    g.snapshot_asked(t0);
    EXPECT_FALSE(g.snapshot_answered(10'000));
    g.snapshot_asked(t0 + 250ms);
    EXPECT_FALSE(g.snapshot_answered(10'000 + 100'000)) << "still flooding: 400 bytes per ms";
    g.snapshot_asked(t0 + 500ms);
    EXPECT_TRUE(g.snapshot_answered(110'000 + 400)) << "quiet: 1.6 bytes per ms";
    EXPECT_EQ(g.mode(), Mode::Streaming);
    EXPECT_TRUE(g.pass(1000, t0 + 500ms)) << "a full bucket again";
}

TEST(FloodGate, AFailedScreenIsAskedAgainAfterTheInterval) {
    FloodGate g(limits());
    ASSERT_FALSE(g.pass(2000, t0));
    g.snapshot_asked(t0);
    g.snapshot_failed();
    EXPECT_FALSE(g.snapshot_due(t0 + 100ms));
    EXPECT_TRUE(g.snapshot_due(t0 + 250ms));
    g.give_up(t0 + 250ms);
    EXPECT_EQ(g.mode(), Mode::Streaming);
    EXPECT_FALSE(g.snapshot_due(t0 + 1s));
}

TEST(FloodGate, ClockGoingBackwardsGivesNoTokens) {
    FloodGate g(limits());
    ASSERT_TRUE(g.pass(1000, t0 + 1s));
    EXPECT_FALSE(g.pass(10, t0)) << "an earlier time refills nothing";
}

}  // namespace
}  // namespace ptyvisor::web
