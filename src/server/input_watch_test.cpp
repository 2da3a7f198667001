#include "server/input_watch.h"

#include <gtest/gtest.h>

#include <chrono>

#include "common/event.h"
#include "server/testing/terminal_program.h"

namespace ptyvisor::server {
namespace {

using testing::TerminalProgram;

class InputWatchTest : public ::testing::Test {
protected:
    void SetUp() override {
        sd_event* e = nullptr;
        ASSERT_GE(sd_event_new(&e), 0);
        loop_.reset(e);
    }
    // Runs the loop until `done` or `limit` (a failure bound, not a wait for time).
    template <class Done>
    bool run_until(Done done, std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (!done()) {
            if (std::chrono::steady_clock::now() >= deadline) return false;
            if (sd_event_run(loop_.get(), 100'000) < 0) return false;
        }
        return true;
    }
    EventLoop loop_;
};

TEST_F(InputWatchTest, SomeoneAskingLearnsOfAWaitWithoutAskingAgain) {
    TerminalProgram program({"sh", "-c", "echo ready; read line"});
    ASSERT_TRUE(program.started());
    ASSERT_TRUE(program.await_output("ready"));
    int told = 0;
    InputWatch watch(loop_.get(), [&] { ++told; }, [] { return std::uint64_t{0}; });
    watch.set_terminal(program.master());
    watch.want();
    ASSERT_TRUE(run_until([&] { return told > 0; }));
    EXPECT_TRUE(watch.waiting());
    EXPECT_EQ(watch.waits(), 1u);
    ASSERT_TRUE(watch.since_ms());
    // Seen waiting, it probes no more until something happens.
    const auto probes = watch.probes();
    EXPECT_EQ(sd_event_run(loop_.get(), 200'000), 0);  // nothing is armed: the loop times out
    EXPECT_EQ(watch.probes(), probes);
    // Activity: not waiting, and asked again.
    watch.activity();
    EXPECT_FALSE(watch.waiting());
    ASSERT_TRUE(run_until([&] { return told > 1; }));
    EXPECT_EQ(watch.waits(), 2u);
}

TEST_F(InputWatchTest, NobodyAskingCostsNoProbe) {
    TerminalProgram program({"sh", "-c", "echo ready; read line"});
    ASSERT_TRUE(program.started());
    ASSERT_TRUE(program.await_output("ready"));
    InputWatch watch(loop_.get(), [] {}, [] { return std::uint64_t{0}; });
    watch.set_terminal(program.master());
    watch.activity();
    EXPECT_EQ(sd_event_run(loop_.get(), 200'000), 0);  // no timer: the loop times out idle
    EXPECT_EQ(watch.probes(), 0u);
    // LIST asks once, on demand.
    const bool waiting = [&] {
        for (int i = 0; i < 200; ++i) {
            if (watch.probe_now()) return true;
            // The shell may still be on its way to its read: retried, bounded.
            program.read_output(std::chrono::milliseconds(10));
        }
        return false;
    }();
    EXPECT_TRUE(waiting);
}

TEST_F(InputWatchTest, AComputingProgramIsNeverReportedWaiting) {
    TerminalProgram program({"sh", "-c", "echo ready; while :; do :; done"});
    ASSERT_TRUE(program.started());
    ASSERT_TRUE(program.await_output("ready"));
    int told = 0;
    InputWatch watch(loop_.get(), [&] { ++told; }, [] { return std::uint64_t{0}; });
    watch.set_terminal(program.master());
    watch.want();
    // Over the first probes (20, 40, 80, 160 ms after the activity), none says waiting.
    ASSERT_TRUE(run_until([&] { return watch.probes() >= 4; }));
    EXPECT_EQ(told, 0);
    EXPECT_FALSE(watch.waiting());
}

}  // namespace
}  // namespace ptyvisor::server
