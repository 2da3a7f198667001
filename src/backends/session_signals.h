// Signals a client asks for (SIGNAL frames), delivered with the agent's authority, not root's.
//
// The daemon is root, so kill() from it reaches anything. A client's SIGNAL must reach no
// more than the agent itself could: a process is signalled only if
//  - it is a member of the session (in the session's cgroup, or in the session's process
//    session where the direct backend has no cgroup), and
//  - its real and saved uid are both the agent's (a setuid program the agent started keeps
//    root as its saved uid, and the agent could not signal it either).
// Each candidate is pinned (common/process.h's PidRef) before /proc is read and confirmed
// after, so the facts read belong to the process signalled and a recycled PID is never hit.
//
// The cleanup at session end (cgroup.kill, KillUnit, StopUnit) does not go through here: it
// must end every process, whoever it runs as.
//
// Nothing here blocks: it reads cgroupfs and /proc, which is fine on the event loop.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace ptyvisor::backends {

// The four ids of a "Uid:" or "Gid:" line of /proc/PID/status.
struct ProcessIds {
    uid_t real = 0, effective = 0, saved = 0, fs = 0;
    bool operator==(const ProcessIds&) const = default;
};

// The Uid: line of a /proc/PID/status text; nullopt if it is missing or malformed.
std::optional<ProcessIds> parse_status_uids(std::string_view status);

// The rule: real and saved uid are the agent's. (The effective uid follows from them for a
// process that cannot gain privileges, and the kernel's own kill() check for the agent
// compares against real and saved.)
bool agent_may_signal(const ProcessIds& ids, uid_t agent);

// The process group (field 5) of a /proc/PID/stat text; nullopt if malformed.
std::optional<pid_t> parse_stat_pgrp(std::string_view stat);
// The session (field 6) of a /proc/PID/stat text; nullopt if malformed.
std::optional<pid_t> parse_stat_session(std::string_view stat);

// Which processes belong to a session.
struct SessionMembers {
    uid_t agent = 0;
    // The session cgroup: `cgroup_dir` its directory (for cgroup.procs), `cgroup` its path as
    // /proc/PID/cgroup shows it. A session's processes cannot leave it, nor create child
    // cgroups (root owns it; no Delegate=), so cgroup.procs lists all of them.
    std::string cgroup_dir;
    std::string cgroup;
    // Without a cgroup (direct backend on a machine without a writable cgroup v2): the
    // members are the processes of this process session, found by scanning /proc.
    pid_t session_id = 0;
};

// Sends `sig` to every member the rule allows. Returns 0 when at least one was signalled,
// -ESRCH when there was no member, -EPERM when every member failed the uid rule.
int signal_members(const SessionMembers& members, int sig);

// Sends `sig` to the members in process group `pgid` that the rule allows. Returns 0 when at
// least one was signalled, -ESRCH when no member is in that group (the group is gone, or it
// is not the session's), -EPERM when every one of them failed the uid rule.
int signal_member_group(const SessionMembers& members, pid_t pgid, int sig);

}  // namespace ptyvisor::backends
