#include "common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include <linux/magic.h>

#include "common/linux.h"

namespace ptyvisor {
namespace {

std::string proc_path(pid_t pid, std::string_view file) {
    std::string path = "/proc/" + std::to_string(pid) + "/";
    path.append(file);
    return path;
}

// Reads `file` under /proc/<pid> of the process behind pidfd, confirming identity after.
std::optional<std::string> read_proc_of(int pidfd, std::string_view file) {
    const pid_t pid = pidfd_to_pid(pidfd);
    if (pid <= 0) return std::nullopt;
    auto text = read_small_file(proc_path(pid, file));
    if (!text || !pidfd_alive(pidfd) || pidfd_to_pid(pidfd) != pid) return std::nullopt;
    return text;
}

bool next_number(std::string_view& s, std::uint64_t& out) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc{} || end == s.data()) return false;
    s.remove_prefix(static_cast<std::size_t>(end - s.data()));
    return true;
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

std::optional<std::string> cgroup_from_text(std::string_view text) {
    std::size_t at = 0;
    while (at < text.size()) {
        const auto end = std::min(text.find('\n', at), text.size());
        const auto line = text.substr(at, end - at);
        if (line.substr(0, 3) == "0::") return std::string(line.substr(3));
        at = end + 1;
    }
    return std::nullopt;
}

std::optional<std::uint64_t> stat_field(std::string_view stat, int n) {
    if (n < 4) return std::nullopt;
    const auto close = stat.rfind(')');
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view rest = stat.substr(close + 1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.empty()) return std::nullopt;
    rest.remove_prefix(1);  // field 3, the state letter
    std::uint64_t v = 0;
    for (int i = 4; i <= n; ++i)
        if (!next_number(rest, v)) return std::nullopt;
    return v;
}

bool same_process(std::string_view before, std::string_view after) {
    const auto name_end = before.rfind(')');
    if (name_end == std::string_view::npos ||
        after.substr(0, name_end + 1) != before.substr(0, name_end + 1))
        return false;
    for (const int n : {4, 5, 6})
        if (stat_field(before, n) != stat_field(after, n)) return false;
    return true;
}

std::optional<std::string> process_cgroup(int pidfd) {
    const auto text = read_proc_of(pidfd, "cgroup");
    if (!text) return std::nullopt;
    return cgroup_from_text(*text);
}

std::optional<pid_t> process_session(int pidfd) {
    const auto text = read_proc_of(pidfd, "stat");
    if (!text) return std::nullopt;
    const auto session = stat_field(*text, 6);
    if (!session) return std::nullopt;
    return static_cast<pid_t>(*session);
}

std::optional<PidRef> PidRef::pin(pid_t pid) {
    if (pid <= 0) return std::nullopt;
    UniqueFd fd(pidfd_open(pid));
    if (fd) return PidRef(pid, std::move(fd), {});
    if (errno == ENOSYS) return pin_by_pid(pid);
    return std::nullopt;  // ESRCH: gone already
}

std::optional<PidRef> PidRef::pin_by_pid(pid_t pid) {
    if (pid <= 0) return std::nullopt;
    auto stat = read_small_file(proc_path(pid, "stat"));
    if (!stat || !stat_field(*stat, 6)) return std::nullopt;
    return PidRef(pid, UniqueFd(), std::move(*stat));
}

std::optional<std::string> PidRef::read(std::string_view file) const {
    return read_small_file(proc_path(pid_, file));
}

bool PidRef::confirm() const {
    if (pidfd_) return pidfd_alive(pidfd_.get()) && pidfd_to_pid(pidfd_.get()) == pid_;
    const auto now = read("stat");
    // A zombie keeps its stat: by PID, "alive" is its state letter, which follows the name.
    if (!now || !same_process(stat_, *now)) return false;
    const auto state = now->rfind(')') + 2;
    return state < now->size() && (*now)[state] != 'Z' && (*now)[state] != 'X';
}

std::optional<std::string> PidRef::cgroup() const {
    if (pidfd_) return process_cgroup(pidfd_.get());
    const auto text = read("cgroup");
    if (!text || !confirm()) return std::nullopt;
    return cgroup_from_text(*text);
}

int PidRef::signal(int sig) const {
    const int r = pidfd_ ? pidfd_send_signal(pidfd_.get(), sig) : ::kill(pid_, sig);
    return r < 0 ? -errno : 0;
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

pid_t tracer_of(pid_t pid) {
    const auto status = read_small_file("/proc/" + std::to_string(pid) + "/status");
    if (!status) return 0;
    const auto at = status->find("\nTracerPid:");
    if (at == std::string::npos) return 0;
    const char* p = status->c_str() + at + 11;
    while (*p == ' ' || *p == '\t') ++p;
    pid_t tracer = 0;
    std::from_chars(p, status->c_str() + status->size(), tracer);
    return tracer;
}

bool parse_resource_limits(std::string_view text, ResourceLimits& out) {
    // "%-25s %-20s %-20s %-10s\n" per row (fs/proc/base.c), after a header row.
    const auto value = [](std::string_view field, rlim_t& v) {
        while (!field.empty() && field.back() == ' ') field.remove_suffix(1);
        if (field == "unlimited") return v = RLIM_INFINITY, true;
        std::uint64_t n = 0;
        const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), n);
        if (ec != std::errc() || end != field.data() + field.size() || field.empty()) return false;
        v = static_cast<rlim_t>(n);
        return true;
    };
    std::size_t at = text.find('\n');
    for (std::size_t r = 0; r < out.size(); ++r) {
        if (at == std::string_view::npos) return false;
        const std::size_t end = text.find('\n', at + 1);
        const std::string_view row = text.substr(at + 1, end == std::string_view::npos ? std::string_view::npos : end - at - 1);
        if (row.size() < 67 || !value(row.substr(26, 20), out[r].rlim_cur) || !value(row.substr(47, 20), out[r].rlim_max))
            return false;
        at = end;
    }
    return true;
}

int read_resource_limits(pid_t pid, int pidfd, ResourceLimits& out) {
    const auto text = read_small_file("/proc/" + std::to_string(pid) + "/limits");
    if (!text) return -ESRCH;
    if (!parse_resource_limits(*text, out)) return -EBADMSG;
    return pidfd_alive(pidfd) ? 0 : -ESRCH;
}

}  // namespace ptyvisor
