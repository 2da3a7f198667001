// The reliability suite's main(): GoogleTest, run from a cgroup of its own.
//
// The direct backend keeps its sessions in <cgroup2 mount><daemon's cgroup>/ptyvisor.sessions
// and, at start-up, kills every session cgroup it finds there (CleanupOrphans). A daemon
// forked by this suite lives in the suite's cgroup. On a machine where every process shares
// one cgroup (build containers: everything is in "/"), two daemons started side by side by
// different test runs would therefore clean up each other's live sessions, and this suite's
// crash-safety checks ("nothing left in ptyvisor.sessions") would see other runs' sessions.
// So, as root with a writable cgroup2 and the direct backend, the suite moves itself into a
// fresh child cgroup first and removes it at exit.
//
// With PTYVISOR_REQUIRE_SYSTEMD=1 (run-systemd.sh), a run in which any test was skipped, or
// no test ran at all, fails: that run exists to run the systemd scenarios, and a skip there
// (no /run/systemd/system, a wrong backend) would otherwise pass unseen.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include "rel_support.h"

namespace {

using namespace ptyvisor::itest;

bool write_file(const std::string& path, const std::string& text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    return ok;
}

class CgroupJail {
public:
    CgroupJail() {
        if (::geteuid() != 0 || backend() != "direct") return;
        const std::string mount = rel::cgroup2_mount();
        const std::string own = rel::own_cgroup();
        if (mount.empty() || own.empty()) return;
        parent_ = mount + (own == "/" ? std::string() : own);
        path_ = parent_ + "/ptyvisor-reliability-" + std::to_string(::getpid());
        if (::mkdir(path_.c_str(), 0755) != 0) {
            std::cerr << "reliability: cannot create " << path_ << ": " << std::strerror(errno)
                      << " (running in the shared cgroup)\n";
            path_.clear();
            return;
        }
        if (!write_file(path_ + "/cgroup.procs", "0")) {
            std::cerr << "reliability: cannot enter " << path_ << ": " << std::strerror(errno)
                      << " (running in the shared cgroup)\n";
            ::rmdir(path_.c_str());
            path_.clear();
        }
    }
    ~CgroupJail() {
        if (path_.empty()) return;
        write_file(parent_ + "/cgroup.procs", "0");
        for (const auto& d : rel::subdirectories(path_ + "/ptyvisor.sessions")) {
            for (const auto& e : rel::subdirectories(d)) ::rmdir(e.c_str());
            ::rmdir(d.c_str());
        }
        ::rmdir((path_ + "/ptyvisor.sessions").c_str());
        ::rmdir(path_.c_str());
    }

private:
    std::string parent_;
    std::string path_;
};

// Under PTYVISOR_REQUIRE_SYSTEMD=1: 1 if any test was skipped or none ran, after naming them.
int fail_on_skips() {
    const auto& unit = *::testing::UnitTest::GetInstance();
    int skipped = 0;
    for (int i = 0; i < unit.total_test_suite_count(); ++i) {
        const auto& suite = *unit.GetTestSuite(i);
        for (int j = 0; j < suite.total_test_count(); ++j) {
            const auto& info = *suite.GetTestInfo(j);
            if (!info.should_run() || !info.result()->Skipped()) continue;
            std::cerr << "reliability: PTYVISOR_REQUIRE_SYSTEMD=1 and " << suite.name() << "." << info.name()
                      << " was skipped\n";
            ++skipped;
        }
    }
    if (skipped > 0) {
        std::cerr << "reliability: " << skipped << " test(s) skipped in a run that requires systemd: FAILED\n";
        return 1;
    }
    if (unit.test_to_run_count() == 0) {
        std::cerr << "reliability: PTYVISOR_REQUIRE_SYSTEMD=1 and no test ran: FAILED\n";
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    bool listing = false;
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--gtest_list_tests") == 0) listing = true;
    if (listing) return RUN_ALL_TESTS();
    CgroupJail jail;
    const int rc = RUN_ALL_TESTS();
    if (rc == 0 && rel::systemd_required()) return fail_on_skips();
    return rc;
}
