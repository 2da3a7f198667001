// SandboxProfile and SessionUsage: the limits a session runs under, and what it has cost.
//
// An administrator names profiles in the configuration ([profiles.NAME], docs/configuration.md)
// and says which ones the agent may choose; START names one (or gets the default). Every
// setting is enforced by the backend that starts the session (the systemd backend as unit
// properties; the direct backend with the session's cgroup, namespaces and Landlock), except
// runtime_max and idle_timeout, which the server enforces the same way on both.
//
// Invariants:
//  - A profile only ever narrows what a session may do: the agent's own account, the copied
//    sandbox of its unit and [session.properties] still apply, and no_new_privs and the empty
//    capability bounding set are never loosened by it.
//  - A backend that cannot enforce a setting on this host refuses the START
//    (Backend::check_profile): a session never runs with less confinement than its profile
//    says.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ptyvisor::backends {

struct SandboxProfile {
    std::string name;
    std::optional<std::uint64_t> memory_max;  // bytes (the OOM killer acts inside the session)
    std::optional<std::uint64_t> tasks_max;   // processes and threads together
    // Percent of one CPU: 50 is half of one, 200 two of them (systemd's CPUQuota=).
    std::optional<std::uint32_t> cpu_quota_percent;
    std::optional<std::chrono::seconds> runtime_max;   // the server ends it: `runtime-limit`
    std::optional<std::chrono::seconds> idle_timeout;  // no output and no input: `idle-timeout`
    enum class Network { Host, None };                 // None: a network namespace, loopback only
    Network network = Network::Host;
    // ReadOnly: every file system read-only but the working directory, `writable` and a
    // private /tmp (and /var/tmp, /dev/shm).
    enum class Filesystem { Host, ReadOnly };
    Filesystem filesystem = Filesystem::Host;
    bool writable_cwd = false;            // "cwd" in `writable`
    std::vector<std::string> writable;    // absolute paths, writable under ReadOnly
    std::vector<std::string> hidden;      // absolute paths made inaccessible (any Filesystem)

    [[nodiscard]] bool confines_filesystem() const { return filesystem == Filesystem::ReadOnly || !hidden.empty(); }
    // Whether the backend has anything to enforce (runtime_max and idle_timeout are the server's).
    [[nodiscard]] bool needs_backend() const {
        return memory_max || tasks_max || cpu_quota_percent || network == Network::None || confines_filesystem();
    }
    bool operator==(const SandboxProfile&) const = default;
};

// What a session has cost, from its cgroup. Each field is nullopt where this host's cgroups
// do not count it (docs/operations.md says which hierarchy counts what).
struct SessionUsage {
    std::optional<std::uint64_t> cpu_usec;       // user + system
    std::optional<std::uint64_t> memory_current; // bytes
    std::optional<std::uint64_t> memory_peak;    // bytes
    std::optional<std::uint64_t> tasks_current;
    std::optional<std::uint64_t> tasks_peak;
    std::optional<std::uint64_t> oom_kills;      // processes the OOM killer ended in it
    std::optional<std::uint64_t> tasks_limit_hits;  // forks refused at tasks_max
    std::optional<std::uint64_t> io_read_bytes;
    std::optional<std::uint64_t> io_write_bytes;
    bool operator==(const SessionUsage&) const = default;
};

}  // namespace ptyvisor::backends
