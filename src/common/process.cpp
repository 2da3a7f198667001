#include "common/process.h"

#include <fcntl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdio>

#include <linux/magic.h>

#include "common/linux.h"
#include "common/unique_fd.h"

namespace ptyvisor {
namespace {

std::optional<std::string> cgroup_from_text(const std::string& text) {
    std::size_t at = 0;
    while (at < text.size()) {
        const auto end = text.find('\n', at);
        const std::string line = text.substr(at, end == std::string::npos ? end : end - at);
        if (line.rfind("0::", 0) == 0) return line.substr(3);
        if (end == std::string::npos) break;
        at = end + 1;
    }
    return std::nullopt;
}

// Reads `file` under /proc/<pid> of the process behind pidfd, confirming identity after.
std::optional<std::string> read_proc_of(int pidfd, const char* file) {
    const pid_t pid = pidfd_to_pid(pidfd);
    if (pid <= 0) return std::nullopt;
    auto text = read_small_file("/proc/" + std::to_string(pid) + "/" + file);
    if (!text || !pidfd_alive(pidfd) || pidfd_to_pid(pidfd) != pid) return std::nullopt;
    return text;
}

}  // namespace

std::optional<std::string> read_small_file(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) return std::nullopt;
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0) return std::nullopt;
        if (n == 0) break;
        out.append(buf, static_cast<std::size_t>(n));
        if (out.size() > (1 << 20)) return std::nullopt;
    }
    return out;
}

std::optional<std::string> process_cgroup(int pidfd) {
    const auto text = read_proc_of(pidfd, "cgroup");
    if (!text) return std::nullopt;
    return cgroup_from_text(*text);
}

std::optional<pid_t> process_session(int pidfd) {
    const auto text = read_proc_of(pidfd, "stat");
    if (!text) return std::nullopt;
    // Fields after the command name, which may itself hold spaces and parentheses.
    const auto close = text->rfind(')');
    if (close == std::string::npos) return std::nullopt;
    // state ppid pgrp session
    unsigned long ppid = 0, pgrp = 0, session = 0;
    char state = 0;
    if (std::sscanf(text->c_str() + close + 1, " %c %lu %lu %lu", &state, &ppid, &pgrp, &session) != 4)
        return std::nullopt;
    return static_cast<pid_t>(session);
}

std::optional<std::string> cgroup2_mount() {
    for (const char* path : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
        struct statfs fs{};
        if (::statfs(path, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC) return std::string(path);
    }
    return std::nullopt;
}

std::optional<std::string> own_cgroup() {
    const auto text = read_small_file("/proc/self/cgroup");
    if (!text) return std::nullopt;
    return cgroup_from_text(*text);
}

std::optional<std::string> process_cgroup_by_pid(pid_t pid) {
    const auto text = read_small_file("/proc/" + std::to_string(pid) + "/cgroup");
    if (!text) return std::nullopt;
    return cgroup_from_text(*text);
}

}  // namespace ptyvisor
