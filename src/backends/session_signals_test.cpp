#include "backends/session_signals.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
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

// Against the real /proc: a child that made a process session of its own, which nothing
// else is in. (Our own session will not do: where its leader lives outside our PID
// namespace, as in a CI container, getsid() says 0.) Signal 0 tests delivery without effect.
class SessionOfAChild {
public:
    SessionOfAChild() {
        int ready[2];
        if (::pipe(ready) != 0) return;
        pid_ = ::fork();
        if (pid_ == 0) {
            ::close(ready[0]);
            ::setsid();
            (void)!::write(ready[1], "x", 1);
            for (;;) ::pause();
        }
        ::close(ready[1]);
        char c;
        // The child's write says setsid() is done; EOF would mean it died first.
        if (pid_ > 0 && ::read(ready[0], &c, 1) != 1) pid_ = -1;
        ::close(ready[0]);
    }
    ~SessionOfAChild() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
    }
    pid_t pid() const { return pid_; }

private:
    pid_t pid_ = -1;
};

TEST(SessionSignals, DeliversToAMemberTheRuleAllows) {
    SessionOfAChild child;
    ASSERT_GT(child.pid(), 0);
    SessionMembers m;
    m.agent = ::getuid();
    m.session_id = child.pid();  // a session leader's pid is its session id and its group
    EXPECT_EQ(signal_members(m, 0), 0);
    EXPECT_EQ(signal_member_group(m, child.pid(), 0), 0);
}

TEST(SessionSignals, ProcessesOfAnotherUidAreRefusedWithEperm) {
    SessionOfAChild child;
    ASSERT_GT(child.pid(), 0);
    SessionMembers m;
    m.agent = ::getuid() + 1;  // as if the child were a stranger's process in the agent's session
    m.session_id = child.pid();
    EXPECT_EQ(signal_members(m, 0), -EPERM);
    EXPECT_EQ(signal_member_group(m, child.pid(), 0), -EPERM);
}

TEST(SessionSignals, AGroupOutsideTheSessionIsRefusedWithEsrch) {
    SessionOfAChild child;
    ASSERT_GT(child.pid(), 0);
    SessionMembers m;
    m.agent = ::getuid();
    m.session_id = child.pid();
    EXPECT_EQ(signal_member_group(m, ::getpgrp(), 0), -ESRCH);  // our group, not the session's
    EXPECT_EQ(signal_member_group(m, 1, 0), -ESRCH);            // init's group
    EXPECT_EQ(signal_member_group(m, 0, 0), -ESRCH);
    SessionMembers nobody = m;
    nobody.session_id = 0;
    EXPECT_EQ(signal_members(nobody, 0), -ESRCH);
}

}  // namespace
}  // namespace ptyvisor::backends
