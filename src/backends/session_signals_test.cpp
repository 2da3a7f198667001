#include "backends/session_signals.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace ptyvisor::backends {
namespace {

// /proc/PID/status of a setuid-root program the agent (uid 1000) started without
// no_new_privs: real uid the agent's, effective and saved root.
constexpr const char* kSetuidRootStatus =
    "Name:\tsudo\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\nPid:\t4242\n"
    "PPid:\t4200\nTracerPid:\t0\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n";

constexpr const char* kAgentStatus =
    "Name:\tsleep\nPid:\t4243\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n";

TEST(SessionSignals, ParsesAllFourUidsOfTheStatusLine) {
    const auto ids = parse_status_uids(kSetuidRootStatus);
    ASSERT_TRUE(ids);
    EXPECT_EQ(*ids, (ProcessIds{1000, 0, 0, 0}));
    EXPECT_EQ(parse_status_uids("Name:\tx\nUid:\t1\t2\t3\t4\n"), (ProcessIds{1, 2, 3, 4}));
}

TEST(SessionSignals, MalformedStatusIsNotParsed) {
    EXPECT_FALSE(parse_status_uids("Name:\tx\n"));
    EXPECT_FALSE(parse_status_uids("Uid:\t1000\t1000\n"));
    EXPECT_FALSE(parse_status_uids("Uid:\tabc\t1\t1\t1\n"));
    EXPECT_FALSE(parse_status_uids("Uid:\t99999999999\t1\t1\t1\n"));
    // Only a line that starts with the key counts.
    EXPECT_FALSE(parse_status_uids("Name:\tUid:\t1\t1\t1\t1\n"));
}

TEST(SessionSignals, AgentsOwnProcessMayBeSignalled) {
    EXPECT_TRUE(agent_may_signal(*parse_status_uids(kAgentStatus), 1000));
}

// The attack: a SIGNAL from the agent's client must not carry root's authority to a setuid
// program whose saved uid is root, nor to any process of another account.
TEST(SessionSignals, SetuidRootProcessInTheSessionIsNotSignalledForTheAgent) {
    EXPECT_FALSE(agent_may_signal(*parse_status_uids(kSetuidRootStatus), 1000));
    EXPECT_FALSE(agent_may_signal({1000, 1000, 0, 1000}, 1000));  // saved root
    EXPECT_FALSE(agent_may_signal({0, 1000, 1000, 1000}, 1000));  // real root
    EXPECT_FALSE(agent_may_signal({1001, 1001, 1001, 1001}, 1000));
}

TEST(SessionSignals, StatFieldsSurviveParenthesesInTheCommandName) {
    const char* stat = "4242 (a) b (c)) S 4200 4100 4000 34816 4100 4194560 0 0";
    EXPECT_EQ(parse_stat_pgrp(stat), 4100);
    EXPECT_EQ(parse_stat_session(stat), 4000);
    EXPECT_FALSE(parse_stat_pgrp("4242 (x"));
    EXPECT_FALSE(parse_stat_session("4242 (x) S 1"));
}

// Against the real /proc: a session identified by our own process session, which only we
// (and whatever else shares it) are in. Signal 0 tests delivery without effect.
TEST(SessionSignals, DeliversToAMemberTheRuleAllows) {
    SessionMembers m;
    m.agent = ::getuid();
    m.session_id = ::getsid(0);
    EXPECT_EQ(signal_members(m, 0), 0);
    EXPECT_EQ(signal_member_group(m, ::getpgrp(), 0), 0);
}

TEST(SessionSignals, ProcessesOfAnotherUidAreRefusedWithEperm) {
    SessionMembers m;
    m.agent = ::getuid() + 1;  // as if we were a stranger's process in the agent's session
    m.session_id = ::getsid(0);
    EXPECT_EQ(signal_members(m, 0), EPERM);
    EXPECT_EQ(signal_member_group(m, ::getpgrp(), 0), EPERM);
}

TEST(SessionSignals, AGroupOutsideTheSessionIsRefusedWithEsrch) {
    SessionMembers m;
    m.agent = ::getuid();
    m.session_id = ::getsid(0);
    EXPECT_EQ(signal_member_group(m, 1, 0), ::getsid(0) == 1 ? 0 : ESRCH);  // init's group
    EXPECT_EQ(signal_member_group(m, 0, 0), ESRCH);
    SessionMembers nobody = m;
    nobody.session_id = 0;
    EXPECT_EQ(signal_members(nobody, 0), ESRCH);
}

}  // namespace
}  // namespace ptyvisor::backends
