// Spawning a session's command: everything the child does between clone and exec.
//
// The parent copies every string and array the child reads into the child's own memory
// (ChildMemory) beforehand, so the child only makes raw system calls: no allocation, no
// errno, no lock. The child reports a failure to exec (and the step that failed) through a
// close-on-exec pipe; EOF on that pipe without data means exec succeeded.
//
// Where it can (x86-64, no sanitizer), the child shares the daemon's address space until it
// execs (CLONE_VM, as posix_spawn does), on a stack of its own: a fork would copy the
// daemon's page tables for a process that replaces them at once, which costs about a
// millisecond on a virtual machine. Unlike posix_spawn the daemon does not wait for the
// exec (no CLONE_VFORK): exec opens a path the agent chose, which may block. Invariants:
//   - the child touches only its ChildMemory (stack and data) and read-only globals;
//   - its ChildMemory stays mapped until the child has exec'd (the status pipe's EOF: the
//     kernel closes close-on-exec descriptors after it has switched address spaces) or has
//     been reaped. Destroyed before either, it is leaked, never unmapped under the child.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/unique_fd.h"

namespace ptyvisor::backends::direct {

// The memory a child runs on until it execs or exits: its stack below a guard page, then a
// copy of what it reads (spawn.cpp's Plan).
class ChildMemory {
public:
    ChildMemory() = default;
    ChildMemory(void* base, std::size_t size, bool shared) : base_(base), size_(size), shared_(shared) {}
    ChildMemory(ChildMemory&& o) noexcept { *this = std::move(o); }
    ChildMemory& operator=(ChildMemory&& o) noexcept;
    ChildMemory(const ChildMemory&) = delete;
    ChildMemory& operator=(const ChildMemory&) = delete;
    ~ChildMemory();

    void* base() const { return base_; }
    std::size_t size() const { return size_; }
    // Whether the child shares the daemon's address space (and so runs on this memory).
    bool shared() const { return shared_; }
    // A child that shares our address space runs on it now.
    void mark_shared() { shared_ = true; }
    // The child has exec'd or been reaped: the memory is unmapped now.
    void child_done();

private:
    void* base_ = nullptr;
    std::size_t size_ = 0;
    bool shared_ = false;
};

struct Spawned {
    pid_t pid = -1;
    UniqueFd pidfd;
    UniqueFd exec_status;  // read end of the status pipe, non-blocking
    ChildMemory memory;    // to keep until the child has exec'd or been reaped
};

// `cgroup_dir` is the session's cgroup v2 directory (O_DIRECTORY), or -1 for none;
// `v1_cgroups` its v1 directories (cgroup_limits.h), which the child joins before anything
// else; `landlock_abi` the host's (sandbox_setup.h), for a profile's read-only file system.
// Returns pid -1 with `why` on failure.
Spawned spawn_session(const SessionSpec& spec, int cgroup_dir, const std::vector<int>& v1_cgroups, int landlock_abi,
                      std::string& why);

// Decodes what the child wrote to the status pipe into a message for the client.
std::string describe_exec_failure(const unsigned char* data, std::size_t size, const std::string& command);

}  // namespace ptyvisor::backends::direct
