// Facts about other processes, read so that a recycled PID can never mislead us.
//
// The rule, written here once for every caller: pin the process, read /proc, then confirm
// that the pin still holds the process read about; only then believe, or act on, what was
// read. A pidfd is the pin wherever the kernel gives one. Where pidfd_open does not exist
// (ENOSYS: valgrind's emulation, never a kernel we run on) the pin is the PID itself,
// confirmed by /proc/PID/stat (name, parent, process group, session) being unchanged across
// the reads: only a PID reused within that window, by a look-alike, could be mistaken.
#pragma once

#include <sys/resource.h>

#include <sys/types.h>

#include <cstdint>
#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "common/unique_fd.h"

namespace ptyvisor {

// The cgroup v2 path ("/system.slice/x.service") of the process behind `pidfd`, read and
// then confirmed: the pidfd is still alive and still names the PID read.
std::optional<std::string> process_cgroup(int pidfd);

// The session ID (getsid) of the process behind `pidfd`, confirmed likewise.
std::optional<pid_t> process_session(int pidfd);

// One process, pinned as the rule above says. Movable, not copyable: a pidfd has one owner.
class PidRef {
public:
    // Pins `pid` by pidfd, or by PID where pidfd_open answers ENOSYS; nullopt when the
    // process is gone (or pid <= 0, which names no single process).
    static std::optional<PidRef> pin(pid_t pid);
    // The fallback pin() takes on ENOSYS, callable directly so that it can be tested.
    static std::optional<PidRef> pin_by_pid(pid_t pid);

    [[nodiscard]] pid_t pid() const { return pid_; }
    [[nodiscard]] bool by_pid() const { return !pidfd_; }
    [[nodiscard]] int pidfd() const { return pidfd_.get(); }  // -1 when pinned by PID
    // The pidfd, for a caller that keeps watching the process; the PidRef is spent.
    [[nodiscard]] UniqueFd take_pidfd() && { return std::move(pidfd_); }

    // /proc/PID/<file>, not yet confirmed.
    [[nodiscard]] std::optional<std::string> read(std::string_view file) const;
    // Whether everything read so far belongs to the pinned process: it is still alive and
    // still the one at pid().
    [[nodiscard]] bool confirm() const;
    // The process's cgroup v2 path, read and then confirmed.
    [[nodiscard]] std::optional<std::string> cgroup() const;
    // Sends `sig` to the pinned process. Returns 0 or -errno.
    int signal(int sig) const;

private:
    PidRef(pid_t pid, UniqueFd pidfd, std::string stat)
        : pid_(pid), pidfd_(std::move(pidfd)), stat_(std::move(stat)) {}

    pid_t pid_;
    UniqueFd pidfd_;
    std::string stat_;  // by PID: /proc/PID/stat when pinned, what confirm() compares against
};

// Field `n` (1-based, n >= 4, as proc(5) numbers them) of a /proc/PID/stat text, counted
// after the command name, which may itself hold spaces and parentheses; nullopt if malformed.
std::optional<std::uint64_t> stat_field(std::string_view stat, int n);

// Whether two readings of /proc/PID/stat are of one process: the same name (up to its
// closing parenthesis), parent, process group and session.
bool same_process(std::string_view before, std::string_view after);

// The mount point of the cgroup v2 hierarchy: /sys/fs/cgroup, or /sys/fs/cgroup/unified on
// a hybrid host; nullopt when there is none.
std::optional<std::string> cgroup2_mount();

// The cgroup v2 path of this process ("0::" line of /proc/self/cgroup).
std::optional<std::string> own_cgroup();

// The "0::" path of a /proc/PID/cgroup text (the other lines are v1 controllers on a hybrid
// host); nullopt when it has none.
std::optional<std::string> cgroup_from_text(std::string_view text);

// Whole-file read of a small /proc or /sys file; nullopt on error.
std::optional<std::string> read_small_file(const std::string& path);

// The TracerPid of a process (0: none, or it cannot be read: it is gone).
pid_t tracer_of(pid_t pid);

// Every resource limit of a process (prlimit), indexed by RLIMIT_*.
using ResourceLimits = std::array<struct rlimit, RLIM_NLIMITS>;
// Reads them for `pid` from /proc/PID/limits (prlimit on another process needs
// CAP_SYS_RESOURCE, which a confined daemon may lack), and confirms by `pidfd` that the
// process read is still the one meant (a PID may be reused). 0 or a negative errno.
int read_resource_limits(pid_t pid, int pidfd, ResourceLimits& out);
// The limits in a /proc/PID/limits text: its rows, in RLIMIT_* order. False if malformed.
bool parse_resource_limits(std::string_view text, ResourceLimits& out);

}  // namespace ptyvisor
