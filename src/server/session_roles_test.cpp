#include "server/session_roles.h"

#include <gtest/gtest.h>

namespace ptyvisor::server {
namespace {

TEST(SessionRoles, TheAgentControlsRootAndTheSupervisorGroupSuperviseTheObserverGroupObserves) {
    EXPECT_EQ(access_of({.may_start = true}), Access::Control);
    EXPECT_EQ(access_of({.is_root = true}), Access::Supervise);
    EXPECT_EQ(access_of({.in_supervisor_group = true}), Access::Supervise);
    EXPECT_EQ(access_of({.in_observer_group = true, .in_supervisor_group = true}), Access::Supervise);
    EXPECT_EQ(access_of({.may_start = true, .in_supervisor_group = true}), Access::Control);
    EXPECT_EQ(access_of({.in_observer_group = true}), Access::Observe);
    EXPECT_EQ(access_of({}), Access::None);
}

TEST(SessionRoles, OneControllerAtATimeAndTakingOverIsExplicit) {
    EXPECT_EQ(decide_attach(Access::Control, Role::Controller, false, false), AttachDecision::Attach);
    EXPECT_EQ(decide_attach(Access::Control, Role::Controller, true, false), AttachDecision::Busy);
    EXPECT_EQ(decide_attach(Access::Control, Role::Controller, true, true), AttachDecision::AttachTakingOver);
}

TEST(SessionRoles, AnObserverCannotBecomeTheController) {
    EXPECT_EQ(decide_attach(Access::Observe, Role::Controller, false, false), AttachDecision::NotAllowed);
    EXPECT_EQ(decide_attach(Access::Observe, Role::Controller, true, true), AttachDecision::NotAllowed);
    EXPECT_EQ(decide_attach(Access::None, Role::Observer, false, false), AttachDecision::NotAllowed);
}

TEST(SessionRoles, ObservingNeverDisturbsTheController) {
    EXPECT_EQ(decide_attach(Access::Observe, Role::Observer, true, false), AttachDecision::Attach);
    EXPECT_EQ(decide_attach(Access::Control, Role::Observer, true, true), AttachDecision::Attach);
}

// A supervisor's takeover is holding the terminal; without takeover it cannot be controller.
TEST(SessionRoles, ASupervisorHoldsTheTerminalOnlyByTakingOver) {
    EXPECT_EQ(decide_attach(Access::Supervise, Role::Controller, true, true), AttachDecision::AttachHolding);
    EXPECT_EQ(decide_attach(Access::Supervise, Role::Controller, false, true), AttachDecision::AttachHolding);
    EXPECT_EQ(decide_attach(Access::Supervise, Role::Controller, true, false), AttachDecision::NotAllowed);
    EXPECT_EQ(decide_attach(Access::Supervise, Role::Observer, true, false), AttachDecision::Attach);
    EXPECT_FALSE(may(Access::Supervise, Request::Send));
    EXPECT_FALSE(may(Access::Supervise, Request::Kill));
    EXPECT_TRUE(may(Access::Supervise, Request::List));
}

TEST(SessionRoles, ObserversOnlyRead) {
    for (const auto r : {Request::List, Request::Read, Request::Wait}) {
        EXPECT_TRUE(may(Access::Observe, r));
        EXPECT_TRUE(may(Access::Control, r));
        EXPECT_FALSE(may(Access::None, r));
    }
    for (const auto r : {Request::Send, Request::Kill, Request::Resize}) {
        EXPECT_FALSE(may(Access::Observe, r));
        EXPECT_TRUE(may(Access::Control, r));
    }
}

}  // namespace
}  // namespace ptyvisor::server
