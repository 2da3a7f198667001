// CgroupControllers: the resource limits and accounting of direct sessions, on whichever
// cgroup layout the host has.
//
// Two layouts exist. Pure cgroup v2 (Debian 12's default): the memory, pids, cpu and io
// controllers are enabled in the subtree_control of the sessions' parents we own, and each
// session's v2 directory (session_cgroup.h) carries its limits and figures. Hybrid: the
// controllers are v1 hierarchies (/sys/fs/cgroup/memory, ...) beside a v2 hierarchy with no
// controllers, which still gives membership and cgroup.kill; each session then also gets a
// same-named directory under <hierarchy><our v1 cgroup>/ptyvisor.sessions/<instance> in
// every v1 hierarchy we use, and its first process joins them before it execs.
//
// Invariants:
//  - A controller is "available" only when its files can be written for a session on this
//    host: check() never promises a limit that write_limits() cannot apply.
//  - Accounting directories exist for every session, with or without a profile.
//  - Every path read or written is a cgroupfs file under our own sessions root: never a path
//    the agent controls. Reads are small and never block (cgroupfs files).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/sandbox_profile.h"

namespace ptyvisor::backends::direct {

enum class Layer { None, V1, V2 };

// One session's cgroup directories: its v2 directory and its v1 ones.
struct SessionCgroups {
    std::string v2;                 // absolute; empty without cgroup v2
    std::vector<std::string> v1;    // every v1 directory created for it (absolute)
    std::string memory_v1, pids_v1, cpu_v1, cpuacct_v1;  // which of v1 holds which controller
};

class CgroupControllers {
public:
    // Finds the layout; `v2_instance` is the v2 instance directory (CgroupRoot::path()) or
    // empty; `instance` names this daemon's instance (as in session_cgroup.h).
    static CgroupControllers discover(const std::string& v2_instance, const std::string& instance);

    // Pure v2 with memory, pids, cpu (and io, swap as given) enabled, without looking at the
    // host: for tests of the v2 file formats on a host that lacks the layout (a directory of
    // plain files then stands in for cgroupfs).
    static CgroupControllers pure_v2(const std::string& v2_instance, bool swap, bool io);

    [[nodiscard]] Layer memory() const { return memory_; }
    [[nodiscard]] Layer pids() const { return pids_; }
    [[nodiscard]] Layer cpu() const { return cpu_; }

    // Whether every cgroup setting of `profile` (memory_max, tasks_max, cpu_quota_percent)
    // can be applied here; false with why.
    bool check(const SandboxProfile& profile, std::string& why) const;

    // Creates the session's v1 directories (v2's is made by session_cgroup.h, passed in
    // `out.v2`) and writes the profile's limits. 0, or -errno with `why`; on failure what
    // was created is removed.
    int create(const std::string& unit, const SandboxProfile* profile, SessionCgroups& out, std::string& why) const;

    // The session directories of `unit` that exist (a session taken back after a re-exec).
    [[nodiscard]] SessionCgroups existing(const std::string& unit, const std::string& v2) const;

    // Every v1 instance directory (for cleanup_orphans: a crash leaves sessions there).
    [[nodiscard]] const std::vector<std::string>& v1_instances() const { return v1_instances_; }

private:
    struct V1 {
        std::string instance;  // absolute: <mount><own>/ptyvisor.sessions/<instance>
        bool memory = false, pids = false, cpu = false, cpuacct = false;
    };
    std::vector<V1> v1_;
    std::vector<std::string> v1_instances_;
    std::string v2_instance_;
    Layer memory_ = Layer::None, pids_ = Layer::None, cpu_ = Layer::None;
    bool v2_io_ = false;
    bool memsw_ = false;        // v1 memory.memsw.* (swap accounting) present
    bool v2_swap_ = false;      // v2 memory.swap.max present
};

// What the session has cost, from the files of `dirs`. Fields this layout does not count are
// nullopt (tasks_peak on v1: the kernel keeps no such figure there).
SessionUsage read_usage(const SessionCgroups& dirs);

// Removes the session's v1 directories (rmdir; ENOENT is success). 0 or the first -errno.
int remove_v1(const SessionCgroups& dirs);

// Parsing, for tests: the value of `key` in a "key value" per line text (cpu.stat,
// memory.events, pids.events, memory.oom_control).
std::optional<std::uint64_t> keyed_value(const std::string& text, const std::string& key);
// The sums of rbytes= and wbytes= over every device line of an io.stat text.
std::pair<std::uint64_t, std::uint64_t> io_stat_bytes(const std::string& text);

}  // namespace ptyvisor::backends::direct
