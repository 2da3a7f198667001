#include "common/scheduling.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace ptyvisor
