#include "backends/exit_status.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>

namespace ptyvisor::backends {
namespace {

using protocol::ExitReason;
using protocol::ExitStatus;

TEST(ExitStatusFrom, AnExitKeepsItsCode) {
    const auto s = exit_status_from({CLD_EXITED, 203});
    EXPECT_EQ(s.kind, ExitStatus::Kind::Exited);
    EXPECT_EQ(s.code, 203);
    EXPECT_EQ(s.signal, 0);
    EXPECT_FALSE(s.core_dumped);
    EXPECT_EQ(s.reason, ExitReason::Exited);
    EXPECT_EQ(s.unit_result, "");
    EXPECT_EQ(exit_status_from({CLD_EXITED, 0}).code, 0);
}

TEST(ExitStatusFrom, AKillNamesTheSignal) {
    const auto s = exit_status_from({CLD_KILLED, SIGTERM});
    EXPECT_EQ(s.kind, ExitStatus::Kind::Signaled);
    EXPECT_EQ(s.signal, SIGTERM);
    EXPECT_EQ(s.code, 0);
    EXPECT_FALSE(s.core_dumped);
    EXPECT_EQ(s.reason, ExitReason::Exited);
}

TEST(ExitStatusFrom, ACoreDumpIsASignalWithTheCoreFlag) {
    const auto s = exit_status_from({CLD_DUMPED, SIGSEGV});
    EXPECT_EQ(s.kind, ExitStatus::Kind::Signaled);
    EXPECT_EQ(s.signal, SIGSEGV);
    EXPECT_TRUE(s.core_dumped);
}

// systemd's ExecMainCode is 0 for a process it has no exit for; a stopped or continued child
// is no end either.
TEST(ExitStatusFrom, AnythingElseIsUnknown) {
    for (const int code : {0, int{CLD_TRAPPED}, int{CLD_STOPPED}, int{CLD_CONTINUED}, -1}) {
        const auto s = exit_status_from({code, 9});
        EXPECT_EQ(s.kind, ExitStatus::Kind::Unknown) << code;
        EXPECT_EQ(s.code, 0) << code;
        EXPECT_EQ(s.signal, 0) << code;
        EXPECT_EQ(s.reason, ExitReason::Exited) << code;
    }
}

}  // namespace
}  // namespace ptyvisor::backends
