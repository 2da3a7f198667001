// The session's sandbox (security review, issue 11): nothing in a session becomes more
// powerful than the agent. Each test is named for the attack it stops and fails without the
// fix.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>

#include "common/linux.h"
#include "common/process.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

const Millis kWait{20000};

// Runs `argv` as `uid`/`gid` outside any session (no no_new_privs) and returns its stdout.
std::string run_as(uid_t uid, gid_t gid, const std::vector<std::string>& argv) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return "pipe failed";
    CStrings args(argv);
    CStrings env({"PATH=/usr/bin:/bin"});
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out[1], 1);
        if (drop_privileges(uid, gid, {})) ::execve(argv[0].c_str(), args.get(), env.get());
        ::_exit(127);
    }
    ::close(out[1]);
    UniqueFd read_end(out[0]);
    std::string text;
    char buf[256];
    for (ssize_t n; (n = ::read(read_end.get(), buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
    ::waitpid(pid, nullptr, 0);
    return text;
}

// Attack: the agent runs sudo, su or any setuid-root program inside a session and becomes
// root. A copy of id(1), setuid root, must report the agent as its effective uid.
TEST_F(EndToEnd, SetuidRootBinaryStaysUnprivilegedInASession) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string suid_id = *dir_ / "suid-id";
    std::filesystem::copy_file("/usr/bin/id", suid_id);
    ASSERT_EQ(::chown(suid_id.c_str(), 0, 0), 0);
    ASSERT_EQ(::chmod(suid_id.c_str(), 04755), 0);
    // Control: outside a session the bit works here, so the assertion below can fail.
    ASSERT_EQ(run_as(account_->uid, account_->gid, {suid_id, "-u"}), "0\n")
        << "setuid is not honoured on " << suid_id << "'s file system: this test would prove nothing";

    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(start_session(*c, {"sh", "-c", "'" + suid_id + "' -u; '" + suid_id + "'"}));
    std::string seen;
    const auto e = c->read_until_exit(kWait, &seen);
    ASSERT_TRUE(e) << seen << c->output();
    EXPECT_EQ(e->kind, protocol::ExitStatus::Kind::Exited);
    const std::string uid = std::to_string(account_->uid);
    EXPECT_EQ(c->output().substr(0, c->output().find('\n') + 1), uid + "\r\n") << c->output();
    EXPECT_EQ(c->output().find("euid="), std::string::npos) << c->output();
}

// Attack: a file capability or a setuid program regains a capability in the session. Every
// session runs with no_new_privs and an empty bounding set, under either backend.
TEST_F(EndToEnd, SessionRunsWithNoNewPrivsAndAnEmptyCapabilityBoundingSet) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(start_session(*c, {"grep", "-E", "^(NoNewPrivs|CapBnd|CapPrm|CapEff|CapAmb):", "/proc/self/status"}));
    std::string seen;
    const auto e = c->read_until_exit(kWait, &seen);
    ASSERT_TRUE(e) << seen << c->output();
    const std::string out = without_cr(c->output());
    EXPECT_NE(out.find("NoNewPrivs:\t1\n"), std::string::npos) << out;
    EXPECT_NE(out.find("CapBnd:\t0000000000000000\n"), std::string::npos) << out;
    EXPECT_NE(out.find("CapPrm:\t0000000000000000\n"), std::string::npos) << out;
    EXPECT_NE(out.find("CapEff:\t0000000000000000\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace ptyvisor::itest
