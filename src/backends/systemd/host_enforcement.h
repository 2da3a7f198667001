// What this host's systemd can enforce of a SandboxProfile (backend.h check_profile()).
//
// systemd accepts MemoryMax=, TasksMax= and CPUQuota= on any host and enforces them only where
// it manages the matching cgroup controller: on a pure cgroup v2 host, a controller listed in
// the root's cgroup.controllers; on a hybrid or legacy host (v1 controllers mounted under
// /sys/fs/cgroup/NAME), a mounted v1 hierarchy. A controller bound to v1 is absent from v2, so
// a hybrid host whose systemd was given only the v2 hierarchy (a container, the plain test
// harness) enforces none of them. check_profile refuses such a profile instead of running it
// with less confinement than it says.
//
// Invariants:
//  - HostEnforcement is probed once, at start-up (it reads /sys/fs/cgroup, /proc/self/mountinfo
//    and /proc/swaps: the daemon sees the cgroup mounts that systemd sees, since it runs as
//    one of its services, or inside its namespaces in the harness).
//  - check_profile_on() refuses every setting this host would accept and silently ignore.
#pragma once

#include <string>
#include <string_view>

#include "backends/sandbox_profile.h"

namespace ptyvisor::backends::systemd {

enum class CgroupLayout { Unified, Hybrid, Legacy, None };

struct HostEnforcement {
    unsigned systemd_version = 0;  // major, from the manager's Version property
    CgroupLayout layout = CgroupLayout::None;
    // Controllers systemd manages here (v2 ones on Unified; v1 hierarchies otherwise).
    bool memory = false;
    bool pids = false;
    bool cpu = false;
    bool io = false;      // v2 io or v1 blkio
    bool swap = false;    // swap is on: a v1 memory limit does not cover it (no MemorySwapMax=)
    // The cgroup v2 mount (for cpu.stat, which v2 keeps on every cgroup), or empty.
    std::string unified_mount;
    bool operator==(const HostEnforcement&) const = default;
};

// Reads the host; `version` is the manager's Version string ("252.39-1~deb12u2").
HostEnforcement probe_host(std::string_view version);

// The pure parts of probe_host(), for tests.
unsigned parse_systemd_version(std::string_view version);
// Sets memory/pids/cpu/io from a v2 cgroup.controllers line ("cpu io memory pids").
void apply_v2_controllers(std::string_view controllers, HostEnforcement& host);
// Sets memory/pids/cpu/io from the cgroup v1 mounts under /sys/fs/cgroup in a mountinfo text.
void apply_v1_mounts(std::string_view mountinfo, HostEnforcement& host);
// Whether /proc/swaps lists an active swap area.
bool swap_listed(std::string_view proc_swaps);

// Whether every setting of `profile` is enforced on `host`; false with `why` (safe to show to
// the client) naming the first that is not.
bool check_profile_on(const HostEnforcement& host, const SandboxProfile& profile, std::string& why);

// "unified (cgroup v2; controllers: memory pids cpu)", for logs and docs.
std::string describe(const HostEnforcement& host);

}  // namespace ptyvisor::backends::systemd
