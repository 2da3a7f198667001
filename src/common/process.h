// Facts about other processes, read so that a recycled PID can never mislead us: each
// reader takes a pidfd, reads /proc, then checks the pidfd is still alive and still names
// the same PID, so the answer belongs to the process the pidfd refers to.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace ptyvisor {

// The cgroup v2 path ("/system.slice/x.service") of the process behind `pidfd`.
std::optional<std::string> process_cgroup(int pidfd);

// The session ID (getsid) of the process behind `pidfd`.
std::optional<pid_t> process_session(int pidfd);

// The mount point of the cgroup v2 hierarchy: /sys/fs/cgroup, or /sys/fs/cgroup/unified on
// a hybrid host; nullopt when there is none.
std::optional<std::string> cgroup2_mount();

// The cgroup v2 path of this process ("0::" line of /proc/self/cgroup).
std::optional<std::string> own_cgroup();

// The same for the process with ID `pid`, for where no pidfd can be had: racy against PID
// reuse, so a caller confirms what it read some other way.
std::optional<std::string> process_cgroup_by_pid(pid_t pid);

// Whole-file read of a small /proc or /sys file; nullopt on error.
std::optional<std::string> read_small_file(const std::string& path);

}  // namespace ptyvisor
