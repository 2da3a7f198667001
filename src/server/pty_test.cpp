#include "server/pty.h"

#include <gtest/gtest.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ptyvisor::server {
namespace {

// Other members of the agent's primary group must not write into the agent's terminal.
TEST(Pty, PeerIsMode0600OwnedByTheAgentNotWritableByItsGroup) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "SKIPPED, NOT TESTED: giving the terminal to another account needs root";
    constexpr uid_t kAgent = 65534;
    constexpr gid_t kAgentGroup = 65534;
    PtyPair pty;
    ASSERT_EQ(open_pty(kAgent, kAgentGroup, {24, 80}, pty), 0);
    struct stat st{};
    ASSERT_EQ(::fstat(pty.peer.get(), &st), 0);
    EXPECT_EQ(st.st_uid, kAgent);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    ASSERT_EQ(::stat(pty.peer_path.c_str(), &st), 0);  // the name in /dev/pts says the same
    EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// The terminal's group is "tty" (as login makes it), never the agent's primary group.
TEST(Pty, TerminalGroupIsTtyWhereThereIsOne) {
    const group* tty = ::getgrnam("tty");
    if (tty == nullptr) GTEST_SKIP() << "SKIPPED, NOT TESTED: this system has no group tty";
    EXPECT_EQ(terminal_group(65534), tty->gr_gid);
}

}  // namespace
}  // namespace ptyvisor::server
