// A session unit's usage (backend.h SessionUsage), read from its cgroup files.
//
// Plain file reads of cgroupfs, which never block on anything the session controls: safe on
// the event loop. Which files, by layout:
//   unified (v2): cpu.stat, memory.current/.peak/.events, pids.current/.peak/.events, io.stat
//   hybrid/legacy (v1 controllers): memory.usage_in_bytes/.max_usage_in_bytes/.oom_control,
//     pids.*, blkio.throttle.io_service_bytes_recursive; CPU time from the v2 hierarchy's
//     cpu.stat (v2 keeps it on every cgroup) or else cpuacct.usage.
// A figure whose file is absent (controller not enabled, older kernel) stays nullopt.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "backends/sandbox_profile.h"
#include "backends/systemd/host_enforcement.h"

namespace ptyvisor::backends::systemd {

// `cgroup` is the unit's path as /proc/PID/cgroup shows it ("/ptyvisor.slice/x.service").
// nullopt when none of its files can be read (the unit's cgroup is gone).
std::optional<SessionUsage> read_unit_usage(const HostEnforcement& host, const std::string& cgroup);

// The pure parts, for tests.
// The value of `key` in a "key value" per line file (cpu.stat, memory.events, oom_control).
std::optional<std::uint64_t> keyed_value(std::string_view text, std::string_view key);
// Sums of rbytes= and wbytes= over the devices of an io.stat text.
void io_stat_bytes(std::string_view text, std::optional<std::uint64_t>& read, std::optional<std::uint64_t>& write);
// Sums of "MAJ:MIN Read N" and "MAJ:MIN Write N" in a v1 blkio io_service_bytes text.
void blkio_bytes(std::string_view text, std::optional<std::uint64_t>& read, std::optional<std::uint64_t>& write);

}  // namespace ptyvisor::backends::systemd
