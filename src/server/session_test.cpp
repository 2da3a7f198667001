// Session on its own: its stages, from START to Ended, with a backend the test drives
// (testing/held_terminal_backend.h) and no Server.
#include "server/session.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/event.h"
#include "server/testing/held_terminal_backend.h"

namespace ptyvisor::server {
namespace {

using protocol::ExitReason;
using Stage = Session::Stage;

class RecordingClient final : public SessionClient {
public:
    void session_started() override { events.push_back("started"); }
    void session_start_failed(const std::string& why) override { events.push_back("start failed: " + why); }
    void session_changed() override { ++changes; }
    void session_input_room() override {}
    void session_gone() override { events.push_back("gone"); }
    void session_taken_over() override { events.push_back("taken over"); }
    [[nodiscard]] std::uint64_t cursor() const override { return 0; }

    std::vector<std::string> events;
    int changes = 0;
};

class CountingOwner final : public SessionOwner {
public:
    void session_ended(Session&) override { ++ended; }
    int ended = 0;
};

class SessionStages : public ::testing::Test {
protected:
    SessionStages() {
        sd_event_new(&event_);
        loop_.reset(event_);
        config_.timeouts.drain = std::chrono::milliseconds(100);
        context_.event = event_;
        context_.config = &config_;
        context_.agent_uid = ::getuid();
        context_.terminal_group = ::getgid();
        backend_ = std::make_unique<testing::HeldTerminalBackend>(event_);
        context_.admission = &admission_;
        context_.backend = backend_.get();
    }

    // Starts `argv` in a new session, as a connection would: the slot is reserved first.
    std::unique_ptr<Session> start(std::string& why, bool detached = false) {
        auto session = std::make_unique<Session>(context_, owner_, "ptyvisor-00112233445566778899aabbccddeeff.service",
                                                 detached);
        EXPECT_TRUE(admission_.reserve_session());
        backends::SessionSpec spec;
        spec.argv = {"sh"};
        spec.account.uid = ::getuid();
        spec.account.gid = ::getgid();
        started_ok_ = session->start(std::move(spec), protocol::WindowSize{24, 80}, &client_, 1, why);
        return session;
    }

    // Runs the loop until `done` holds; false if it does not within a few seconds.
    bool run_until(const std::function<bool()>& done) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            if (sd_event_run(event_, 1'000'000) < 0) return false;
        }
        return true;
    }

    sd_event* event_ = nullptr;
    EventLoop loop_;
    Config config_;
    Admission admission_{config_.limits};
    std::unique_ptr<testing::HeldTerminalBackend> backend_;
    SessionContext context_;
    CountingOwner owner_;
    RecordingClient client_;
    bool started_ok_ = false;
};

TEST_F(SessionStages, AStartedSessionRunsAndAStopEndsItThroughStoppingAndClosing) {
    std::string why;
    auto session = start(why);
    ASSERT_TRUE(started_ok_) << why;
    EXPECT_EQ(session->stage(), Stage::Starting);
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Running; }));
    EXPECT_EQ(client_.events, std::vector<std::string>{"started"});
    EXPECT_EQ(session->state(), Session::State::Running);

    session->stop(ExitReason::Stopped);
    EXPECT_EQ(session->stage(), Stage::Stopping);
    EXPECT_EQ(session->state(), Session::State::Ending);
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Ended; }));
    ASSERT_TRUE(session->exit_status());
    EXPECT_EQ(session->exit_status()->reason, ExitReason::Stopped);
    EXPECT_EQ(owner_.ended, 1);
    EXPECT_EQ(admission_.sessions(), 0U);
}

TEST_F(SessionStages, ACommandThatExitsIsDrainedThenCleanedUpWithItsStatusAndOutput) {
    std::string why;
    auto session = start(why);
    ASSERT_TRUE(started_ok_) << why;
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Running; }));
    backend_->last->write("last words\n");
    backend_->last->exit(3);
    // Draining read the terminal to its end at once (nothing holds it any more): on to cleanup.
    EXPECT_EQ(session->stage(), Stage::Stopping);
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Ended; }));
    ASSERT_TRUE(session->exit_status());
    EXPECT_EQ(session->exit_status()->reason, ExitReason::Exited);
    EXPECT_EQ(session->exit_status()->code, 3);
    const auto& log = session->log();
    const auto bytes = log.copy(0, log.end());
    const std::string text(bytes.begin(), bytes.end());
    EXPECT_NE(text.find("last words"), std::string::npos) << text;
    EXPECT_GT(client_.changes, 0);
    EXPECT_EQ(owner_.ended, 1);
}

TEST_F(SessionStages, ATerminalHeldOpenPastTheDrainTimeoutEndsWithDrainTimeout) {
    std::string why;
    auto session = start(why);
    ASSERT_TRUE(started_ok_) << why;
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Running; }));
    backend_->last->exit_leaving_terminal_open(0);
    EXPECT_EQ(session->stage(), Stage::Draining);
    ASSERT_TRUE(run_until([&] { return session->stage() != Stage::Draining; }));
    EXPECT_NE(session->stage(), Stage::Draining);
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Ended; }));
    EXPECT_EQ(session->exit_status()->reason, ExitReason::DrainTimeout);
}

TEST_F(SessionStages, AStopThatOvertakesTheStartWaitsForStarted) {
    std::string why;
    auto session = start(why);
    ASSERT_TRUE(started_ok_) << why;
    session->stop(ExitReason::Stopped);
    EXPECT_EQ(session->stage(), Stage::Starting);  // STARTED precedes EXIT
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Ended; }));
    ASSERT_FALSE(client_.events.empty());
    EXPECT_EQ(client_.events.front(), "started");
    EXPECT_EQ(session->exit_status()->reason, ExitReason::Stopped);
}

TEST_F(SessionStages, AStartTheBackendRefusesEndsAtOnceAndFreesTheSlot) {
    backend_->refuse_start = true;
    std::string why;
    auto session = start(why);
    EXPECT_FALSE(started_ok_);
    EXPECT_EQ(why, "refused by the test");
    EXPECT_EQ(session->stage(), Stage::Ended);
    EXPECT_TRUE(session->failed_to_start());
    EXPECT_EQ(admission_.sessions(), 0U);
    EXPECT_EQ(owner_.ended, 1);
}

TEST_F(SessionStages, AStartFailureTheBackendReportsLaterIsCleanedUp) {
    backend_->report_start = false;
    std::string why;
    auto session = start(why);
    ASSERT_TRUE(started_ok_) << why;
    backend_->last->fail_start("no such command");
    EXPECT_EQ(session->stage(), Stage::Stopping);
    EXPECT_EQ(backend_->last->stops, 1);
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Ended; }));
    EXPECT_TRUE(session->failed_to_start());
    EXPECT_EQ(client_.events, std::vector<std::string>{"start failed: no such command"});
    EXPECT_EQ(session->exit_status()->reason, ExitReason::BackendFailed);
    EXPECT_EQ(admission_.sessions(), 0U);
}

TEST_F(SessionStages, TheBackendIsAskedToStopOnceHoweverManyStopsCome) {
    std::string why;
    auto session = start(why);
    ASSERT_TRUE(started_ok_) << why;
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Running; }));
    auto* backend_session = backend_->last;
    session->stop(ExitReason::Stopped);
    session->stop(ExitReason::Shutdown);
    backend_session->exit(0);
    session->stop(ExitReason::ClientStalled);
    EXPECT_EQ(backend_session->stops, 1);
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Ended; }));
    EXPECT_EQ(session->exit_status()->reason, ExitReason::Stopped);  // the first reason holds
}

TEST_F(SessionStages, AFailedCleanupQuarantinesTheSessionAndStillEndsIt) {
    backend_->stop_succeeds = false;
    std::string why;
    auto session = start(why);
    ASSERT_TRUE(started_ok_) << why;
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Running; }));
    session->stop(ExitReason::Stopped);
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Ended; }));
    EXPECT_EQ(admission_.counters().quarantined, 1U);
    EXPECT_EQ(admission_.sessions(), 0U);
}

TEST_F(SessionStages, InputIsHeldUntilTheStartAndDroppedOnceTheSessionEnds) {
    std::string why;
    auto session = start(why);
    ASSERT_TRUE(started_ok_) << why;
    session->write_input(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>("ab"), 2));
    EXPECT_EQ(session->bytes_in(), 2U);
    ASSERT_TRUE(run_until([&] { return session->stage() == Stage::Running; }));
    session->stop(ExitReason::Stopped);
    session->write_input(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>("cd"), 2));
    EXPECT_EQ(session->bytes_in(), 2U);  // late input is dropped
}

}  // namespace
}  // namespace ptyvisor::server
