#include "common/linux.h"

#include <fcntl.h>
#include <poll.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "common/unique_fd.h"

namespace ptyvisor {

pid_t pidfd_to_pid(int pidfd) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
    if (!fd) return -1;
    char buf[1024];
    const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
    if (n <= 0) return -1;
    const std::string_view text(buf, static_cast<size_t>(n));
    const auto at = text.find("\nPid:");
    if (at == std::string_view::npos) return -1;
    auto rest = text.substr(at + 5);
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    long pid = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (ec != std::errc{}) return -1;
    return static_cast<pid_t>(pid);
}

bool pidfd_alive(int pidfd) {
    // A pidfd polls readable once its process has exited.
    pollfd p{pidfd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
}

}  // namespace ptyvisor

namespace ptyvisor {
namespace {
rlimit g_original_nofile{};
bool g_saved = false;
}  // namespace

void raise_nofile_limit() {
    rlimit r{};
    if (::getrlimit(RLIMIT_NOFILE, &r) < 0) return;
    g_original_nofile = r;
    g_saved = true;
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
}

const rlimit& original_nofile_limit() {
    if (!g_saved) {
        ::getrlimit(RLIMIT_NOFILE, &g_original_nofile);
        g_saved = true;
    }
    return g_original_nofile;
}

}  // namespace ptyvisor
