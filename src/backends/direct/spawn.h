// Spawning a session's command: everything the child does between fork and exec.
//
// The parent prepares every string and array beforehand, so the child only makes
// async-signal-safe system calls. The child reports a failure to exec (and the step that
// failed) through a close-on-exec pipe; EOF on that pipe without data means exec succeeded.
#pragma once

#include <sys/types.h>

#include <string>

#include "backends/backend.h"
#include "common/unique_fd.h"

namespace ptyvisor::backends::direct {

struct Spawned {
    pid_t pid = -1;
    UniqueFd pidfd;
    UniqueFd exec_status;  // read end of the status pipe, non-blocking
};

// `cgroup_dir` is the session's cgroup directory (O_DIRECTORY), or -1 for none.
// Returns pid -1 with `why` on failure.
Spawned spawn_session(const SessionSpec& spec, int cgroup_dir, std::string& why);

// Decodes what the child wrote to the status pipe into a message for the client.
std::string describe_exec_failure(const unsigned char* data, std::size_t size, const std::string& command);

}  // namespace ptyvisor::backends::direct
