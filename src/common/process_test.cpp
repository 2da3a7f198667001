// PidRef: "pin, read, then confirm", by pidfd and by the by-PID fallback that stands in for
// pidfd_open where it does not exist (valgrind), against real child processes.
#include "common/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "common/linux.h"

namespace ptyvisor {
namespace {

using namespace std::chrono_literals;

// A child that waits for go(), then execs `sleep` (which changes its name), until killed.
class Child {
public:
    Child() {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) return;
        pid_ = ::fork();
        if (pid_ == 0) {
            char c;
            if (::read(fds[0], &c, 1) == 1)
                ::execl("/bin/sleep", "sleep", "100", static_cast<char*>(nullptr));
            ::_exit(1);
        }
        ::close(fds[0]);
        go_ = fds[1];
        pidfd_.reset(pidfd_open(pid_));
    }
    ~Child() {
        if (go_ >= 0) ::close(go_);
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            reap();
        }
    }
    [[nodiscard]] pid_t pid() const { return pid_; }
    void go() {
        (void)!::write(go_, "x", 1);
        ::close(go_);
        go_ = -1;
    }
    // Kills it and waits until it is a zombie, not yet reaped.
    void kill_unreaped() {
        ::kill(pid_, SIGKILL);
        pollfd p{pidfd_.get(), POLLIN, 0};
        ::poll(&p, 1, 5000);
    }
    void reap() {
        int status = 0;
        ::waitpid(pid_, &status, 0);
        reaped_ = true;
    }

private:
    pid_t pid_ = -1;
    int go_ = -1;
    UniqueFd pidfd_;
    bool reaped_ = false;
};

// Waits until /proc/PID/stat names `name`.
bool named(pid_t pid, const std::string& name) {
    for (int i = 0; i < 500; ++i) {
        const auto stat = read_small_file("/proc/" + std::to_string(pid) + "/stat");
        if (stat && stat->find("(" + name + ")") != std::string::npos) return true;
        std::this_thread::sleep_for(10ms);
    }
    return false;
}

TEST(PidRef, APinnedProcessIsReadAndConfirmedByItsPidfd) {
    Child child;
    ASSERT_GT(child.pid(), 0);
    const auto ref = PidRef::pin(child.pid());
    ASSERT_TRUE(ref);
    EXPECT_FALSE(ref->by_pid());
    EXPECT_GE(ref->pidfd(), 0);
    EXPECT_EQ(ref->pid(), child.pid());
    EXPECT_TRUE(ref->confirm());
    EXPECT_EQ(ref->cgroup(), own_cgroup());
    EXPECT_EQ(ref->signal(0), 0);
}

// The fallback where pidfd_open answers ENOSYS: the same answers while the process is the
// one pinned.
TEST(PidRef, ByPidAPinnedProcessIsReadAndConfirmedByItsStat) {
    Child child;
    ASSERT_GT(child.pid(), 0);
    const auto ref = PidRef::pin_by_pid(child.pid());
    ASSERT_TRUE(ref);
    EXPECT_TRUE(ref->by_pid());
    EXPECT_EQ(ref->pidfd(), -1);
    EXPECT_TRUE(ref->confirm());
    EXPECT_EQ(ref->cgroup(), own_cgroup());
    EXPECT_EQ(ref->signal(0), 0);
}

// What was read after the process died is not believed, though its zombie is still readable.
TEST(PidRef, ADeadProcessIsNotConfirmedEitherWay) {
    Child child;
    ASSERT_GT(child.pid(), 0);
    const auto by_pidfd = PidRef::pin(child.pid());
    const auto by_pid = PidRef::pin_by_pid(child.pid());
    ASSERT_TRUE(by_pidfd && by_pid);
    child.kill_unreaped();
    EXPECT_TRUE(read_small_file("/proc/" + std::to_string(child.pid()) + "/cgroup"))
        << "a zombie, not reaped";
    EXPECT_FALSE(by_pidfd->confirm());
    EXPECT_FALSE(by_pidfd->cgroup());
    EXPECT_FALSE(by_pid->confirm());
    EXPECT_FALSE(by_pid->cgroup());
    child.reap();
    EXPECT_EQ(by_pidfd->signal(0), -ESRCH);
    EXPECT_FALSE(by_pid->confirm());
    EXPECT_FALSE(PidRef::pin(child.pid()));
    EXPECT_FALSE(PidRef::pin_by_pid(child.pid()));
}

// By PID, a process that is no longer what was pinned (here: it exec'd, and its name changed,
// as a stranger's would differ) is not confirmed.
TEST(PidRef, ByPidAProcessThatChangedIsNotConfirmed) {
    Child child;
    ASSERT_GT(child.pid(), 0);
    const auto ref = PidRef::pin_by_pid(child.pid());
    ASSERT_TRUE(ref);
    ASSERT_TRUE(ref->confirm());
    child.go();
    ASSERT_TRUE(named(child.pid(), "sleep"));
    EXPECT_FALSE(ref->confirm());
    EXPECT_FALSE(ref->cgroup());
    EXPECT_TRUE(PidRef::pin_by_pid(child.pid())->confirm()) << "pinned afresh, it is what it is";
}

// kill(0) or kill(-1) would reach a whole group, or everything.
TEST(PidRef, NoPinNamesMoreThanOneProcess) {
    for (const pid_t pid : {0, -1, -2}) {
        EXPECT_FALSE(PidRef::pin(pid)) << pid;
        EXPECT_FALSE(PidRef::pin_by_pid(pid)) << pid;
    }
}

TEST(ProcessCgroup, AReapedPidfdIsNotRead) {
    Child child;
    ASSERT_GT(child.pid(), 0);
    UniqueFd fd(pidfd_open(child.pid()));
    ASSERT_TRUE(fd);
    EXPECT_EQ(process_cgroup(fd.get()), own_cgroup());
    child.kill_unreaped();
    EXPECT_FALSE(process_cgroup(fd.get()));
    child.reap();
    EXPECT_FALSE(process_cgroup(fd.get()));
}

TEST(ProcStat, FieldsAreCountedAfterTheCommandName) {
    const char* stat = "4242 (a) b (c)) S 4200 4100 4000 34816 4100 4194560 0 0\n";
    EXPECT_EQ(stat_field(stat, 4), 4200u);
    EXPECT_EQ(stat_field(stat, 5), 4100u);
    EXPECT_EQ(stat_field(stat, 6), 4000u);
    EXPECT_FALSE(stat_field(stat, 3)) << "the state letter is no number";
    EXPECT_FALSE(stat_field("4242 (x", 4));
    EXPECT_FALSE(stat_field("4242 (x) S 1", 5));
}

TEST(ProcStat, SameProcessComparesNameParentGroupAndSession) {
    const std::string before = "42 (sh) S 1 42 42 0 -1 4194560 100 0";
    EXPECT_TRUE(same_process(before, "42 (sh) R 1 42 42 0 -1 4194560 999 5"));
    EXPECT_FALSE(same_process(before, "42 (sleep) S 1 42 42 0 -1 4194560 100 0"));
    EXPECT_FALSE(same_process(before, "42 (sh) S 7 42 42 0 -1 4194560 100 0"));
    EXPECT_FALSE(same_process(before, "42 (sh) S 1 43 42 0 -1 4194560 100 0"));
    EXPECT_FALSE(same_process(before, "42 (sh) S 1 42 43 0 -1 4194560 100 0"));
    EXPECT_FALSE(same_process(before, ""));
}

TEST(CgroupFromText, OnlyTheUnifiedLineCounts) {
    EXPECT_EQ(cgroup_from_text("0::/system.slice/a.service\n"), "/system.slice/a.service");
    EXPECT_EQ(cgroup_from_text("12:cpu:/x\n1:name=systemd:/y\n0::/a/b\n"), "/a/b");
    EXPECT_EQ(cgroup_from_text("0::/"), "/");
    EXPECT_FALSE(cgroup_from_text("12:cpu:/x\n"));
    EXPECT_FALSE(cgroup_from_text(""));
}

TEST(ResourceLimits, ParsedFromProcLimitsInRlimitOrder) {
    ResourceLimits from_kernel{};
    const auto text = read_small_file("/proc/self/limits");
    ASSERT_TRUE(text);
    ASSERT_TRUE(parse_resource_limits(*text, from_kernel)) << *text;
    for (int r = 0; r < RLIM_NLIMITS; ++r) {
        rlimit own{};
        ASSERT_EQ(::getrlimit(static_cast<__rlimit_resource>(r), &own), 0);
        EXPECT_EQ(from_kernel[static_cast<std::size_t>(r)].rlim_cur, own.rlim_cur) << "resource " << r;
        EXPECT_EQ(from_kernel[static_cast<std::size_t>(r)].rlim_max, own.rlim_max) << "resource " << r;
    }
    ResourceLimits out{};
    EXPECT_FALSE(parse_resource_limits("Limit  Soft Limit\nMax cpu time   lots   unlimited  seconds\n", out));
    EXPECT_FALSE(parse_resource_limits(text->substr(0, text->size() / 2), out));
}

}  // namespace
}  // namespace ptyvisor
