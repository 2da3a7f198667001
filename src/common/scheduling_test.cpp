#include "common/scheduling.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include <cstdio>

#include <cerrno>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

namespace ptyvisor {
namespace {

// This thread's se.slice in nanoseconds, from /proc/thread-self/sched (Linux 6.6 and later
// show it); nullopt where the kernel does not.
std::optional<long long> own_slice() {
    std::ifstream sched("/proc/thread-self/sched");
    for (std::string line; std::getline(sched, line);)
        if (line.rfind("se.slice", 0) == 0) return std::stoll(line.substr(line.find(':') + 1));
    return std::nullopt;
}

bool kernel_at_least(int major, int minor) {
    utsname u{};
    int ma = 0, mi = 0;
    if (::uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &ma, &mi) != 2) return false;
    return ma > major || (ma == major && mi >= minor);
}

// request_short_slice() asks for the kernel's shortest slice and leaves the nice value as it
// was (sched_setattr sets both). Run on a thread of its own, so the test runner keeps its own.
TEST(Scheduling, AShortSliceKeepsTheNiceValue) {
    int result = 1, nice_before = 0, nice_after = 0;
    std::optional<long long> slice;
    std::thread([&] {
        ::setpriority(PRIO_PROCESS, 0, 5);  // a value the call must keep
        errno = 0;
        nice_before = ::getpriority(PRIO_PROCESS, 0);
        result = request_short_slice();
        nice_after = ::getpriority(PRIO_PROCESS, 0);
        slice = own_slice();
    }).join();
    ASSERT_EQ(result, 0) << "sched_setattr failed: " << -result;
    EXPECT_EQ(nice_before, 5);
    EXPECT_EQ(nice_after, 5);
    // Kernels before 6.12 accept the request and keep their default slice.
    if (!kernel_at_least(6, 12)) GTEST_SKIP() << "a kernel before 6.12 has no per-task slice to check";
    ASSERT_TRUE(slice) << "Linux 6.12 shows se.slice in /proc/thread-self/sched";
    EXPECT_EQ(*slice, 100'000);
}

// reset_scheduling() is what every process the daemon starts does first: the nice value it
// is given, and the kernel's default slice instead of the short one it inherited.
TEST(Scheduling, ResetSchedulingDropsTheInheritedShortSlice) {
    int requested = 1, reset = 1, nice_after = 0;
    std::optional<long long> short_slice, after;
    std::thread([&] {
        requested = request_short_slice();
        short_slice = own_slice();
        reset = reset_scheduling(7);
        errno = 0;
        nice_after = ::getpriority(PRIO_PROCESS, 0);
        after = own_slice();
    }).join();
    ASSERT_EQ(requested, 0) << "sched_setattr failed: " << -requested;
    ASSERT_EQ(reset, 0) << "sched_setattr failed: " << -reset;
    EXPECT_EQ(nice_after, 7);
    if (!kernel_at_least(6, 12)) GTEST_SKIP() << "a kernel before 6.12 has no per-task slice to check";
    ASSERT_TRUE(short_slice && after) << "Linux 6.12 shows se.slice in /proc/thread-self/sched";
    EXPECT_EQ(*short_slice, 100'000);
    EXPECT_GT(*after, 100'000) << "the short slice survived";
}

}  // namespace
}  // namespace ptyvisor
