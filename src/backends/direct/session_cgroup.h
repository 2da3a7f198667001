// SessionCgroup: the cgroup v2 directory that holds every process of one direct session.
//
// Layout: <cgroup2 mount><daemon's cgroup>/ptyvisor.sessions/<instance>/<unit name>, where
// <instance> names one daemon's state directory: two daemons that share a cgroup (as on a
// machine without systemd) never clean up each other's sessions. A session's
// processes cannot leave it (moving needs write access to another cgroup, which the
// account lacks), so membership is how we recognise them, and cgroup.kill ends them all at
// once, double-forked daemons included.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"

namespace ptyvisor::backends::direct {

class CgroupRoot {
public:
    // The sessions directory under our own cgroup, created if missing; nullopt when this
    // machine gives us no writable cgroup v2 with cgroup.kill.
    static std::optional<CgroupRoot> open(const std::string& instance);

    [[nodiscard]] const std::string& path() const { return path_; }             // absolute
    // path() as /proc/PID/cgroup shows it (without the cgroup2 mount point).
    [[nodiscard]] const std::string& relative() const { return relative_; }
    // Every instance's sessions, as in /proc/PID/cgroup: a process under it is in a session.
    [[nodiscard]] const std::string& all_sessions() const { return all_sessions_; }
    [[nodiscard]] std::vector<std::string> children() const;                    // leftover session dirs

private:
    std::string path_;
    std::string relative_;
    std::string all_sessions_;
};

// Creates <root>/<name> and sets `path` to it (absolute). Returns 0 or -errno.
int create_session_cgroup(const CgroupRoot& root, const std::string& name, std::string& path);

// Writes "1" to cgroup.kill; a cgroup already gone counts as success. Returns 0 or -errno.
int kill_cgroup(const std::string& path);

// True when no process is left in the cgroup (cgroup.events says "populated 0").
bool cgroup_empty(const std::string& path);

// rmdir; ENOENT counts as success. Returns 0 or -errno.
int remove_cgroup(const std::string& path);

// PIDs listed in cgroup.procs.
std::vector<pid_t> cgroup_pids(const std::string& path);

// allow_units without a service manager to ask for the unit's ControlGroup: an allowed unit
// "x.service" is the system service systemd places, without Slice=, at /system.slice/x.service.
// A peer is in it only if its cgroup is exactly that path: not a same-named unit elsewhere
// ("/evil.slice/x.service", "/user.slice/.../x.service"), which the account may be able to
// create, and not a cgroup below it (the systemd backend admits only the unit's MainPID,
// which lives in the unit's own cgroup).
std::string allowed_unit_cgroup(const std::string& unit);
bool in_allowed_unit(const std::string& peer_cgroup, const std::vector<std::string>& units);

}  // namespace ptyvisor::backends::direct
