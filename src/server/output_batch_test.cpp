#include "server/output_batch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace ptyvisor::server {
namespace {

class OutputBatchTest : public ::testing::Test {
protected:
    void SetUp() override {
        sd_event* e = nullptr;
        ASSERT_GE(sd_event_new(&e), 0);
        loop_.reset(e);
    }

    // Runs the loop until `done`; false if it is not done within 10 s of the clock.
    bool run_until(const std::function<bool()>& done) {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!done()) {
            if (std::chrono::steady_clock::now() > give_up) return false;
            if (sd_event_run(loop_.get(), 100'000) < 0) return false;
        }
        return true;
    }

    EventLoop loop_;
};

TEST_F(OutputBatchTest, OutputWaitsForTheDelayThenOnDueRunsOnce) {
    constexpr std::uint64_t kDelayUsec = 5'000;
    int due = 0;
    OutputBatch batch(loop_.get(), 1000, kDelayUsec, [&] { ++due; });
    const auto armed_at = std::chrono::steady_clock::now();
    EXPECT_TRUE(batch.wait(10));
    EXPECT_TRUE(batch.armed());
    EXPECT_TRUE(batch.wait(500));  // more came: still waits, for the same timer
    EXPECT_EQ(due, 0);
    ASSERT_TRUE(run_until([&] { return due > 0; }));
    EXPECT_GE(std::chrono::steady_clock::now() - armed_at, std::chrono::microseconds(kDelayUsec));
    EXPECT_EQ(due, 1);
    EXPECT_FALSE(batch.armed());
}

TEST_F(OutputBatchTest, EnoughBytesAreSentAtOnce) {
    OutputBatch batch(loop_.get(), 1000, 5'000, [] {});
    EXPECT_FALSE(batch.wait(1000));
    EXPECT_FALSE(batch.armed());  // nothing waits: no timer runs
    EXPECT_TRUE(batch.wait(999));
    EXPECT_FALSE(batch.wait(1000));  // the timer runs on, for whatever comes next
    EXPECT_TRUE(batch.armed());
}

TEST_F(OutputBatchTest, OnDueMayWaitAgain) {
    int due = 0;
    OutputBatch* self = nullptr;
    OutputBatch batch(loop_.get(), 1000, 1'000, [&] {
        // Disarmed before this runs: output that still waits arms it again.
        if (++due == 1) {
            EXPECT_TRUE(self->wait(1));
        }
    });
    self = &batch;
    ASSERT_TRUE(batch.wait(1));
    ASSERT_TRUE(run_until([&] { return due == 2; }));
    EXPECT_FALSE(batch.armed());
}

TEST_F(OutputBatchTest, CancelledOutputIsNotDue) {
    int due = 0;
    OutputBatch batch(loop_.get(), 1000, 1'000, [&] { ++due; });
    ASSERT_TRUE(batch.wait(1));
    batch.cancel();
    EXPECT_FALSE(batch.armed());
    // A later timer of the loop's own: by when it fires, the batch's would have.
    bool later = false;
    EventSource timer;
    ASSERT_GE(add_timer(loop_.get(), timer, 20'000, [&] { later = true; }), 0);
    ASSERT_TRUE(run_until([&] { return later; }));
    EXPECT_EQ(due, 0);
}

TEST_F(OutputBatchTest, TheBatchWaitsBehindInteractiveWork) {
    std::vector<std::string> order;
    OutputBatch batch(loop_.get(), 1000, 0, [&] { order.push_back("batch"); });
    ASSERT_TRUE(batch.wait(1));
    // Due at the same time, at the normal priority: dispatched first.
    EventSource interactive;
    ASSERT_GE(add_timer(loop_.get(), interactive, 0, [&] { order.push_back("interactive"); }), 0);
    ASSERT_TRUE(run_until([&] { return order.size() == 2; }));
    EXPECT_EQ(order, (std::vector<std::string>{"interactive", "batch"}));
}

}  // namespace
}  // namespace ptyvisor::server
