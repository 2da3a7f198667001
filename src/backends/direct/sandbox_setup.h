// The namespaces and Landlock domain a direct session's first process enters before it
// changes credentials and execs: network = none and filesystem = read-only / hidden paths
// (backends/sandbox_profile.h).
//
// enter_sandbox() runs in the spawned child (spawn.h): raw system calls only, on data the
// parent copied into the child's memory. It runs while the child is still root, after the
// capability bounding set is emptied and before setresuid; nothing it sets up can be undone
// by the session (no capabilities, no_new_privs, and a Landlock domain is never loosened).
//
// Invariants:
//  - network none: a new network namespace whose only interface, loopback, is up.
//  - read-only: a private mount namespace (propagation private) where every mount is read-only
//    (mount_setattr AT_RECURSIVE), except a clone of the working directory when the profile
//    lists "cwd" (taken from the descriptor the server verified, never a path), the admin's
//    writable paths and a fresh
//    tmpfs on /tmp, /var/tmp and /dev/shm; the session starts in the working directory's
//    writable clone. A Landlock domain then grants every write right only beneath that set
//    (and writing, not creating, beneath /dev for the terminal and /dev/null).
//  - hidden paths: an empty read-only tmpfs over a directory, /dev/null over a file.
#pragma once

#include <string>

#include "backends/sandbox_profile.h"

namespace ptyvisor::backends::direct {

// What this host lets the daemon do, probed once by a short-lived child that tries it.
struct SandboxSupport {
    bool network_namespace = false;  // unshare(CLONE_NEWNET) succeeded
    bool mount_namespace = false;    // unshare(CLONE_NEWNS) succeeded
    bool mount_setattr = false;      // the system call exists (Linux 5.12)
    bool open_tree = false;          // open_tree/move_mount exist (Linux 5.2)
    int landlock_abi = 0;            // 0: Landlock absent or disabled

    static SandboxSupport probe();
    // Whether the namespace and Landlock settings of `profile` can be enforced; false with why.
    bool check(const SandboxProfile& profile, std::string& why) const;
};

// What the child reads, laid out in its memory by spawn.cpp.
struct SandboxPlan {
    bool new_network = false;
    bool new_mounts = false;
    bool read_only = false;
    bool writable_cwd = false;  // "cwd" in the profile's writable list
    int landlock_abi = 0;
    char* const* writable = nullptr;  // nullptr-terminated absolute paths
    char* const* hidden = nullptr;
};

// Which step of enter_sandbox() failed.
enum class SandboxStep : int { Network = 1, Loopback, MountNamespace, Propagation, CloneCwd, CloneWritable,
                               ReadOnly, MountCwd, MountWritable, PrivateTmp, Hide, Landlock };

// Runs in the child, with `cwd` the session's working directory descriptor. Returns 0, or
// -errno with `step` set. On success with a file-system sandbox the child is in the
// writable clone of the working directory (the caller must not fchdir(cwd) after it).
long enter_sandbox(const SandboxPlan& plan, int cwd, SandboxStep& step);

const char* describe(SandboxStep step);

}  // namespace ptyvisor::backends::direct
