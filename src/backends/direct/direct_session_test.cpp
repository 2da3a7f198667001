// The direct backend's sessions, started for real: in a cgroup where this machine gives one,
// otherwise tracked by process group. Needs root (a session switches to its account, and the
// cgroup is created under ours); skipped otherwise.
#include "backends/direct/direct_backend.h"
#include "backends/direct/cgroup_limits.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/event.h"
#include "common/linux.h"
#include "common/process.h"
#include "common/scheduling.h"
#include "common/unique_fd.h"

namespace ptyvisor::backends {
namespace {

using namespace std::chrono_literals;
using protocol::ExitStatus;

struct Observed {
    bool started = false;
    pid_t pid = 0;
    std::string start_error;
    std::optional<ExitStatus> exited;
};

SessionEvents observe(Observed& o) {
    SessionEvents ev;
    ev.on_started = [&o](pid_t pid) { o.started = true; o.pid = pid; };
    ev.on_start_failed = [&o](std::string why) {
        o.start_error = why.empty() ? "?" : std::move(why);
    };
    ev.on_exited = [&o](ExitStatus s) { o.exited = std::move(s); };
    return ev;
}

std::string random_unit() {
    unsigned char bytes[16];
    EXPECT_EQ(::getrandom(bytes, sizeof bytes, 0), 16);
    static const char* hex = "0123456789abcdef";
    std::string name = "ptyvisor-";
    for (const unsigned char b : bytes) {
        name += hex[b >> 4];
        name += hex[b & 15];
    }
    return name + ".service";
}

// Whether the process behind `pidfd` exits within `timeout`.
bool exits_within(int pidfd, std::chrono::milliseconds timeout) {
    pollfd p{pidfd, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

class DirectSessions : public ::testing::Test {
protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root: a session switches to its account";
        char dir[] = "/tmp/ptyvisor-direct-XXXXXX";
        ASSERT_NE(::mkdtemp(dir), nullptr);
        root_ = dir;
        sd_event* e = nullptr;
        ASSERT_GE(sd_event_new(&e), 0);
        event_.reset(e);
        options_.event = event_.get();
        options_.state_directory = root_ + "/state";
    }

    void TearDown() override {
        // The instance's cgroup directory, emptied by the tests themselves.
        if (!instance_cgroup_.empty()) {
            // And its v1 twins on a hybrid host (cgroup_limits.h).
            const auto name = instance_cgroup_.substr(instance_cgroup_.rfind('/') + 1);
            const auto controllers = direct::CgroupControllers::discover(instance_cgroup_, name);
            for (const auto& d : controllers.v1_instances()) ::rmdir(d.c_str());
            ::rmdir(instance_cgroup_.c_str());
        }
        if (!root_.empty()) std::filesystem::remove_all(root_);
    }

    std::unique_ptr<Backend> make() {
        std::string why;
        auto backend = make_direct_backend(options_, why);
        EXPECT_TRUE(backend) << why;
        return backend;
    }

    // A session of `argv` as root, on a fresh PTY whose master the test keeps open (its
    // close would hang the session up).
    SessionSpec spec(std::vector<std::string> argv) {
        SessionSpec s;
        s.unit_name = random_unit();
        s.argv = std::move(argv);
        s.env = {"PATH=/usr/bin:/bin", "TERM=dumb"};
        s.account = {"root", 0, 0, {}, "/root", "/bin/sh"};
        cwd_.reset(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        s.cwd = cwd_.get();
        master_.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
        char name[128];
        EXPECT_TRUE(master_ && ::grantpt(master_.get()) == 0 && ::unlockpt(master_.get()) == 0 &&
                    ::ptsname_r(master_.get(), name, sizeof name) == 0);
        s.tty.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
        s.tty_path = name;
        return s;
    }

    // Starts `argv` and runs the loop until it has started.
    std::unique_ptr<SessionProcesses> start(Backend& backend, std::vector<std::string> argv, Observed& o) {
        std::string why;
        auto session = backend.start(spec(std::move(argv)), observe(o), why);
        EXPECT_TRUE(session) << why;
        if (!session) return nullptr;
        EXPECT_TRUE(run_until([&] { return o.started || !o.start_error.empty(); }));
        EXPECT_TRUE(o.started) << o.start_error;
        if (!o.started) return nullptr;
        // The session's cgroup is <instance>/<unit>: TearDown removes the instance.
        const auto main = PidRef::pin(o.pid);
        const auto cgroup = main ? main->cgroup() : std::nullopt;
        const auto mount = cgroup2_mount();
        if (cgroup && mount && cgroup->find("/ptyvisor.sessions/") != std::string::npos)
            instance_cgroup_ = *mount + cgroup->substr(0, cgroup->rfind('/'));
        return session;
    }

    bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!done()) {
            if (std::chrono::steady_clock::now() >= deadline) return false;
            if (sd_event_run(event_.get(), 10'000) < 0) return false;
        }
        return true;
    }

    // Stops `session` and runs the loop until stop() has answered.
    bool stop(SessionProcesses& session) {
        std::optional<bool> ok;
        std::string why;
        session.stop(Clock::now() + 10s, [&](bool done, std::string w) {
            ok = done;
            why = std::move(w);
        });
        EXPECT_TRUE(run_until([&] { return ok.has_value(); }));
        EXPECT_TRUE(ok.value_or(false)) << why;
        return ok.value_or(false);
    }

    bool has_record(const std::string& unit) const {
        struct stat st{};
        return ::lstat((options_.state_directory + "/sessions/" + unit).c_str(), &st) == 0;
    }

    std::string root_;
    EventLoop event_;
    BackendOptions options_;
    UniqueFd cwd_, master_;
    std::string instance_cgroup_;
};

// backend.h: destroying a session without stop() leaves its processes running, and its
// record where the next run's cleanup_orphans() finds it (a daemon that fails closed, or one
// that will adopt its sessions after a restart, depends on both).
TEST_F(DirectSessions, DestroyedWithoutStopItRunsOnUntilTheNextRunCleansUp) {
    auto backend = make();
    ASSERT_TRUE(backend);
    Observed o;
    auto session = start(*backend, {"sleep", "600"}, o);
    ASSERT_TRUE(session);
    const std::string unit = session->unit();
    UniqueFd pidfd(pidfd_open(o.pid));  // our child, unreaped: the PID cannot be reused
    ASSERT_TRUE(pidfd);

    session.reset();
    EXPECT_FALSE(exits_within(pidfd.get(), 200ms)) << "the destructor ended the session";
    EXPECT_TRUE(has_record(unit)) << "the destructor removed the session's record";
    backend.reset();  // the daemon goes, as it does after failing closed
    EXPECT_TRUE(pidfd_alive(pidfd.get()));
    EXPECT_TRUE(has_record(unit));

    // On a hybrid host the session also has v1 directories (cgroup_limits.h): they go too.
    std::optional<direct::CgroupControllers> controllers;
    if (!instance_cgroup_.empty())
        controllers = direct::CgroupControllers::discover(instance_cgroup_, instance_cgroup_.substr(instance_cgroup_.rfind('/') + 1));
    const std::size_t v1_before = controllers ? controllers->existing(unit, "").v1.size() : 0;
    EXPECT_EQ(v1_before, controllers ? controllers->v1_instances().size() : 0);

    auto next = make();
    ASSERT_TRUE(next);
    std::string why;
    EXPECT_TRUE(next->cleanup_orphans(Clock::now() + 10s, why)) << why;
    if (controllers) {
        EXPECT_TRUE(controllers->existing(unit, "").v1.empty()) << "cleanup_orphans() left v1 directories";
    }
    ASSERT_TRUE(exits_within(pidfd.get(), 10'000ms))
        << "cleanup_orphans() left the session running";
    // The next run is this same process, as after a re-exec: cleanup_orphans() reaps what it
    // killed once it is dead (ECHILD here), or else it is ours to reap, killed by SIGKILL.
    siginfo_t info{};
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd.get()), &info, WEXITED) == 0) {
        EXPECT_EQ(info.si_code, CLD_KILLED);
        EXPECT_EQ(info.si_status, SIGKILL);
    } else {
        EXPECT_EQ(errno, ECHILD);
    }
    EXPECT_FALSE(has_record(unit));
}

// stop() is what ends a session, and the record goes with it: nothing is left to clean up.
TEST_F(DirectSessions, StopEndsTheSessionAndRemovesItsRecord) {
    auto backend = make();
    ASSERT_TRUE(backend);
    Observed o;
    auto session = start(*backend, {"sleep", "600"}, o);
    ASSERT_TRUE(session);
    const std::string unit = session->unit();
    EXPECT_TRUE(has_record(unit));
    UniqueFd pidfd(pidfd_open(o.pid));
    ASSERT_TRUE(pidfd);
    ASSERT_TRUE(stop(*session));
    EXPECT_FALSE(pidfd_alive(pidfd.get()));
    EXPECT_FALSE(has_record(unit));
    session.reset();
    EXPECT_FALSE(has_record(unit));
}

// The direct backend's own translation, siginfo_t to ChildCode (backends/exit_status.h).
TEST_F(DirectSessions, TheMainProcessExitIsReported) {
    auto backend = make();
    ASSERT_TRUE(backend);
    struct Case {
        std::vector<std::string> argv;
        ExitStatus::Kind kind;
        int code, signal;
    };
    for (const Case& c :
         {Case{{"sh", "-c", "exit 7"}, ExitStatus::Kind::Exited, 7, 0},
          Case{{"sh", "-c", "kill -TERM $$"}, ExitStatus::Kind::Signaled, 0, SIGTERM}}) {
        Observed o;
        auto session = start(*backend, c.argv, o);
        ASSERT_TRUE(session);
        ASSERT_TRUE(run_until([&] { return o.exited.has_value(); })) << c.argv.back();
        EXPECT_EQ(o.exited->kind, c.kind) << c.argv.back();
        EXPECT_EQ(o.exited->code, c.code) << c.argv.back();
        EXPECT_EQ(o.exited->signal, c.signal) << c.argv.back();
        EXPECT_FALSE(o.exited->core_dumped);
        EXPECT_EQ(o.exited->reason, protocol::ExitReason::Exited);
        ASSERT_TRUE(stop(*session));
    }
}


std::size_t mapping_count() {
    std::ifstream maps("/proc/self/maps");
    std::size_t n = 0;
    for (std::string line; std::getline(maps, line);) ++n;
    return n;
}

// spawn.h: the child runs on memory of its own (it may share our address space) until it
// has exec'd or been reaped. Each start's memory is unmapped by then, whether the exec
// succeeded or failed, and a failed exec still reports the step and error.
TEST_F(DirectSessions, TheChildsMemoryIsReleasedOnceItHasExecdOrExited) {
    auto backend = make();
    ASSERT_TRUE(backend);
    const std::size_t before = mapping_count();
    for (int i = 0; i < 20; ++i) {
        Observed ok;
        auto session = start(*backend, {"true"}, ok);
        ASSERT_TRUE(session);
        ASSERT_TRUE(run_until([&] { return ok.exited.has_value(); }));
        ASSERT_TRUE(stop(*session));

        Observed missing;
        std::string why;
        auto failed = backend->start(spec({"ptyvisor-no-such-command"}), observe(missing), why);
        ASSERT_TRUE(failed) << why;
        ASSERT_TRUE(run_until([&] { return !missing.start_error.empty(); }));
        EXPECT_EQ(missing.start_error, "command not found: ptyvisor-no-such-command");
        EXPECT_FALSE(missing.started);
        ASSERT_TRUE(stop(*failed));
    }
    // A few mappings may come and go with the allocator; 20 starts' worth may not.
    EXPECT_LT(mapping_count(), before + 10) << "child memory left mapped";
}


// common/scheduling.h: the daemon relays at a lower nice value than the agent, and its
// sessions, the agent's, get the original back: never more CPU than the agent. The command
// reports its own nice value (field 19 of /proc/self/stat) as its exit status, plus 20.
TEST_F(DirectSessions, ASessionGetsTheNiceValueTheDaemonStartedWith) {
    auto backend = make();
    ASSERT_TRUE(backend);
    const int original = original_nice();
    ASSERT_GT(original, -20) << "no lower nice value to relay at";
    ASSERT_EQ(raise_relay_priority(original - 1), 0);
    Observed o;
    auto session = start(*backend, {"sh", "-c", "exit $(( $(cut -d' ' -f19 /proc/self/stat) + 20 ))"}, o);
    ::setpriority(PRIO_PROCESS, 0, original);  // this thread is the test runner's again
    ASSERT_TRUE(session);
    ASSERT_TRUE(run_until([&] { return o.exited.has_value(); }));
    EXPECT_EQ(o.exited->kind, ExitStatus::Kind::Exited);
    EXPECT_EQ(o.exited->code, original + 20);
    ASSERT_TRUE(stop(*session));
}

// An administrator may start the daemon at a negative nice value (Nice=-5 in its unit). That
// value is the daemon's, not the agent's: session_nice() floors at 0, so a session is never
// scheduled above an ordinary process of the agent. Run in a fresh process (a "threadsafe"
// death test re-executes the binary), where original_nice() has not been read yet, as in a
// daemon that starts at -5. The command exits with its nice value plus 20.
TEST_F(DirectSessions, ADaemonStartedAtANegativeNiceStartsSessionsAtZero) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (::geteuid() != 0) GTEST_SKIP() << "only root may start at a negative nice value";
    EXPECT_EXIT(
        {
            if (::setpriority(PRIO_PROCESS, 0, -5) < 0 || original_nice() != -5) std::_Exit(90);
            auto backend = make();
            if (!backend) std::_Exit(91);
            Observed o;
            auto session = start(*backend, {"sh", "-c", "exit $(( $(cut -d' ' -f19 /proc/self/stat) + 20 ))"}, o);
            if (!session || !run_until([&] { return o.exited.has_value(); })) std::_Exit(92);
            // Its cgroup directories (v2 and, on a hybrid host, v1) go with stop().
            if (!stop(*session)) std::_Exit(94);
            std::_Exit(o.exited->kind == ExitStatus::Kind::Exited ? o.exited->code : 93);
        },
        ::testing::ExitedWithCode(20), "")
        << "exit 20 + n: the session ran at nice n; 90-93: the setup failed";
}

// The daemon's loop thread asks for a short slice (common/scheduling.h), and a child inherits
// it: a session that kept it was preempted ten times as often, and took CPU promptness the
// agent's own processes do not have. The command exits 3 if its se.slice is the short one.
TEST_F(DirectSessions, ASessionDoesNotInheritTheDaemonsShortSlice) {
    auto backend = make();
    ASSERT_TRUE(backend);
    ASSERT_EQ(request_short_slice(), 0);
    std::string own;
    for (std::ifstream sched("/proc/thread-self/sched"); std::getline(sched, own) && own.rfind("se.slice", 0) != 0;) {}
    if (own.find(':') == std::string::npos || std::stoll(own.substr(own.find(':') + 1)) != 100'000) {
        ASSERT_EQ(reset_scheduling(original_nice()), 0);
        GTEST_SKIP() << "this kernel (before 6.12) has no per-task slice to pass on";
    }
    Observed o;
    auto session = start(*backend, {"sh", "-c", "grep -q '^se.slice  *: *100000$' /proc/self/sched && exit 3; "
                                    "grep -q '^se.slice' /proc/self/sched || exit 4; exit 0"}, o);
    ASSERT_EQ(reset_scheduling(original_nice()), 0);  // this thread is the test runner's again
    ASSERT_TRUE(session);
    ASSERT_TRUE(run_until([&] { return o.exited.has_value(); }));
    EXPECT_EQ(o.exited->kind, ExitStatus::Kind::Exited);
    EXPECT_EQ(o.exited->code, 0) << "3: the session kept the short slice; 4: no se.slice shown";
    EXPECT_TRUE(stop(*session));  // its cgroup directories go with it
}

}  // namespace
}  // namespace ptyvisor::backends
