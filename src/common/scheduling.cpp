#include "common/scheduling.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "common/unique_fd.h"

namespace ptyvisor {
namespace {
int g_original_nice = 0;
bool g_saved = false;
}  // namespace

int original_nice() {
    if (!g_saved) {
        errno = 0;
        const int n = ::getpriority(PRIO_PROCESS, 0);  // -1 is also a valid value: errno tells
        g_original_nice = errno == 0 ? n : 0;
        g_saved = true;
    }
    return g_original_nice;
}

int session_nice() { return original_nice() < 0 ? 0 : original_nice(); }

int raise_relay_priority(int nice) {
    if (nice >= original_nice()) return 0;
    if (::setpriority(PRIO_PROCESS, 0, nice) < 0) return -errno;
    // The autogroup belongs to the process session: only its leader may speak for it, or the
    // shell or test runner that started us would be raised with us.
    if (::getsid(0) != ::getpid()) return 0;
    UniqueFd autogroup(::open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC));
    if (!autogroup) return 0;  // a kernel without autogroups: nice alone decides
    const auto text = std::to_string(nice);
    [[maybe_unused]] const auto n = ::write(autogroup.get(), text.data(), text.size());
    return 0;
}

int request_short_slice() {
    // The shortest slice the kernel accepts (0.1 ms): a relay runs for microseconds per wakeup.
    constexpr std::uint64_t kSliceNs = 100'000;
    errno = 0;
    const int nice = ::getpriority(PRIO_PROCESS, 0);  // this thread's; -1 is valid too
    if (errno != 0) return -errno;
    SchedAttr attr{};
    attr.size = sizeof attr;
    attr.policy = SCHED_OTHER;
    attr.nice = nice;  // sched_setattr sets the nice value too: keep ours
    attr.runtime = kSliceNs;
    if (::syscall(SYS_sched_setattr, 0, &attr, 0) < 0) return -errno;
    return 0;
}

int reset_scheduling(int nice) {
    SchedAttr attr{};
    attr.size = sizeof attr;
    attr.policy = SCHED_OTHER;
    attr.nice = nice;
    attr.runtime = 0;  // the kernel's default slice
    if (::syscall(SYS_sched_setattr, 0, &attr, 0) == 0) return 0;
    // A kernel or seccomp filter without sched_setattr: no custom slice can have been set.
    if (errno != ENOSYS && errno != EPERM) return -errno;
    return ::setpriority(PRIO_PROCESS, 0, nice) < 0 ? -errno : 0;
}

}  // namespace ptyvisor
