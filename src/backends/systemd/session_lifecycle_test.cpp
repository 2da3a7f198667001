// The orders a systemd session relies on, checked without a bus: its phases, the start
// job's JobRemoved against StartTransientUnit's reply, and what a finished service reports.
#include "backends/systemd/session_lifecycle.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>

#include "backends/systemd/systemd_session.h"

namespace ptyvisor::backends::systemd {
namespace {

using Phase = Lifecycle::Phase;

TEST(Lifecycle, AStartedSessionGoesWatchingStartingRunningEnded) {
    Lifecycle l;
    EXPECT_TRUE(l.before_start());
    EXPECT_TRUE(l.watch());
    EXPECT_TRUE(l.before_start());
    EXPECT_TRUE(l.send_start());
    EXPECT_TRUE(l.is(Phase::Starting));
    EXPECT_FALSE(l.before_start());
    EXPECT_TRUE(l.start());
    EXPECT_TRUE(l.is(Phase::Running));
    EXPECT_FALSE(l.finished());
    EXPECT_TRUE(l.end());
    EXPECT_TRUE(l.is(Phase::Ended));
    EXPECT_TRUE(l.finished());
}

// StartTransientUnit only once the unit's match is in force: otherwise a PropertiesChanged
// about the unit could come before we listen, and be missed.
TEST(Lifecycle, TheStartIsNotSentBeforeTheMatch) {
    Lifecycle l;
    EXPECT_FALSE(l.send_start());
    EXPECT_TRUE(l.is(Phase::Created));
}

// backend.h: on_exited never before on_started; each event at most once.
TEST(Lifecycle, AnExitBeforeTheStartIsRefused) {
    Lifecycle l;
    ASSERT_TRUE(l.watch());
    ASSERT_TRUE(l.send_start());
    EXPECT_FALSE(l.end());
    EXPECT_TRUE(l.is(Phase::Starting));
}

TEST(Lifecycle, EachOutcomeIsReportedOnce) {
    Lifecycle started;
    ASSERT_TRUE(started.watch());
    ASSERT_TRUE(started.send_start());
    ASSERT_TRUE(started.start());
    EXPECT_FALSE(started.start());
    EXPECT_FALSE(started.fail_start()) << "a session that started cannot fail to start";
    ASSERT_TRUE(started.end());
    EXPECT_FALSE(started.end());
    EXPECT_TRUE(started.is(Phase::Ended));

    Lifecycle failed;
    ASSERT_TRUE(failed.watch());
    ASSERT_TRUE(failed.send_start());
    ASSERT_TRUE(failed.fail_start());
    EXPECT_TRUE(failed.finished());
    EXPECT_FALSE(failed.fail_start());
    EXPECT_FALSE(failed.start()) << "a session that failed to start cannot start";
    EXPECT_FALSE(failed.end()) << "nor exit";
    EXPECT_TRUE(failed.is(Phase::StartFailed));
}

TEST(Lifecycle, TheMatchAndTheStartHappenOnce) {
    Lifecycle l;
    ASSERT_TRUE(l.watch());
    EXPECT_FALSE(l.watch());
    ASSERT_TRUE(l.send_start());
    EXPECT_FALSE(l.send_start());
}

TEST(StartJob, AJobRemovedAfterTheReplyIsMatchedByPath) {
    StartJob j;
    EXPECT_TRUE(j.awaiting_reply());
    EXPECT_FALSE(j.replied("/job/7"));
    EXPECT_FALSE(j.awaiting_reply());
    EXPECT_FALSE(j.removed("/job/6", "done")) << "another job of the unit";
    EXPECT_EQ(j.removed("/job/7", "done"), "done");
}

// JobRemoved can overtake the reply to StartTransientUnit: it is kept for the reply.
TEST(StartJob, AJobRemovedBeforeTheReplyWaitsForIt) {
    StartJob j;
    EXPECT_FALSE(j.removed("/job/6", "canceled"));
    EXPECT_FALSE(j.removed("/job/7", "failed"));
    EXPECT_TRUE(j.awaiting_reply());
    EXPECT_EQ(j.replied("/job/7"), "failed");
}

TEST(StartJob, AnEarlyJobRemovedOfAnotherJobIsNotOurs) {
    StartJob j;
    EXPECT_FALSE(j.removed("/job/6", "done"));
    EXPECT_FALSE(j.replied("/job/7"));
    EXPECT_EQ(j.removed("/job/7", "done"), "done");
}

TEST(StartJob, TheStartJobFinishesOnce) {
    StartJob j;
    EXPECT_FALSE(j.replied("/job/7"));
    EXPECT_EQ(j.removed("/job/7", "done"), "done");
    EXPECT_FALSE(j.removed("/job/7", "done"));
    EXPECT_FALSE(j.replied("/job/7"));

    StartJob early;
    EXPECT_FALSE(early.removed("/job/7", "done"));
    EXPECT_EQ(early.replied("/job/7"), "done");
    EXPECT_FALSE(early.removed("/job/7", "done"));
}

// The reply was lost with systemd (a reconnect) while the unit was still activating: the
// unit's next JobRemoved is its start job's, whatever path it names, and only that one.
TEST(StartJob, AfterALostReplyTheNextJobRemovedIsOurs) {
    StartJob j;
    j.reply_lost();
    EXPECT_FALSE(j.awaiting_reply());
    EXPECT_EQ(j.removed("/job/9", "done"), "done");
    EXPECT_FALSE(j.removed("/job/10", "done"));
}

TEST(ServiceExitStatus, SystemdAddsItsResultAndTimeout) {
    ServiceState state;
    state.exec_main_code = CLD_KILLED;
    state.exec_main_status = SIGTERM;
    state.result = "timeout";
    auto s = exit_status_from(state);
    EXPECT_EQ(s.kind, protocol::ExitStatus::Kind::Signaled);
    EXPECT_EQ(s.signal, SIGTERM);
    EXPECT_EQ(s.unit_result, "timeout");
    EXPECT_EQ(s.reason, protocol::ExitReason::Timeout);

    state = ServiceState{};
    state.exec_main_code = CLD_EXITED;
    state.exec_main_status = 3;
    state.result = "exit-code";
    s = exit_status_from(state);
    EXPECT_EQ(s.kind, protocol::ExitStatus::Kind::Exited);
    EXPECT_EQ(s.code, 3);
    EXPECT_EQ(s.unit_result, "exit-code");
    EXPECT_EQ(s.reason, protocol::ExitReason::Exited);

    state = ServiceState{};  // no exit known: ExecMainCode 0
    state.result = "success";
    EXPECT_EQ(exit_status_from(state).kind, protocol::ExitStatus::Kind::Unknown);
}

}  // namespace
}  // namespace ptyvisor::backends::systemd
