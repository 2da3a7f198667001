#include "backends/systemd/host_enforcement.h"

#include <sys/statfs.h>
#include <linux/magic.h>

#include <charconv>
#include <sstream>
#include <vector>

#include "common/process.h"

namespace ptyvisor::backends::systemd {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    while (!s.empty()) {
        const auto at = s.find(sep);
        const auto part = s.substr(0, at);
        if (!part.empty()) out.push_back(part);
        if (at == std::string_view::npos) break;
        s.remove_prefix(at + 1);
    }
    return out;
}

std::optional<unsigned long> fs_type(const char* path) {
    struct statfs fs {};
    if (::statfs(path, &fs) != 0) return std::nullopt;
    return static_cast<unsigned long>(fs.f_type);
}

}  // namespace

unsigned parse_systemd_version(std::string_view version) {
    unsigned v = 0;
    // "252.39-1~deb12u2", "v256", "256~rc1": the first run of digits is the major version.
    while (!version.empty() && (version.front() < '0' || version.front() > '9')) version.remove_prefix(1);
    std::from_chars(version.data(), version.data() + version.size(), v);
    return v;
}

void apply_v2_controllers(std::string_view controllers, HostEnforcement& host) {
    for (auto c : split(controllers, ' ')) {
        while (!c.empty() && (c.back() == '\n' || c.back() == '\t')) c.remove_suffix(1);
        if (c == "memory") host.memory = true;
        else if (c == "pids") host.pids = true;
        else if (c == "cpu") host.cpu = true;
        else if (c == "io") host.io = true;
    }
}

void apply_v1_mounts(std::string_view mountinfo, HostEnforcement& host) {
    // mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS"
    for (auto line : split(mountinfo, '\n')) {
        const auto fields = split(line, ' ');
        if (fields.size() < 7 || !fields[4].starts_with("/sys/fs/cgroup/")) continue;
        std::size_t dash = 6;
        while (dash < fields.size() && fields[dash] != "-") ++dash;
        if (dash + 3 >= fields.size()) continue;  // no FSTYPE SOURCE SUPEROPTS after "-"
        if (fields[dash + 1] != "cgroup") continue;  // v1 only; cgroup2 is "cgroup2"
        for (auto opt : split(fields[dash + 3], ',')) {
            if (opt == "memory") host.memory = true;
            else if (opt == "pids") host.pids = true;
            else if (opt == "cpu") host.cpu = true;
            else if (opt == "blkio") host.io = true;
        }
    }
}

bool swap_listed(std::string_view proc_swaps) {
    // The first line is a header; every further non-empty line is an active swap area.
    const auto lines = split(proc_swaps, '\n');
    return lines.size() > 1;
}

HostEnforcement probe_host(std::string_view version) {
    HostEnforcement host;
    host.systemd_version = parse_systemd_version(version);
    const auto root = fs_type("/sys/fs/cgroup");
    if (root == static_cast<unsigned long>(CGROUP2_SUPER_MAGIC)) {
        host.layout = CgroupLayout::Unified;
        host.unified_mount = "/sys/fs/cgroup";
        if (const auto c = read_small_file("/sys/fs/cgroup/cgroup.controllers")) apply_v2_controllers(*c, host);
    } else if (root == static_cast<unsigned long>(TMPFS_MAGIC)) {
        const auto unified = fs_type("/sys/fs/cgroup/unified");
        host.layout = unified == static_cast<unsigned long>(CGROUP2_SUPER_MAGIC) ? CgroupLayout::Hybrid
                                                                                 : CgroupLayout::Legacy;
        if (host.layout == CgroupLayout::Hybrid) host.unified_mount = "/sys/fs/cgroup/unified";
        // systemd 252 on a hybrid host manages controllers through v1 only.
        if (const auto m = read_small_file("/proc/self/mountinfo")) apply_v1_mounts(*m, host);
    }
    if (const auto s = read_small_file("/proc/swaps")) host.swap = swap_listed(*s);
    return host;
}

bool check_profile_on(const HostEnforcement& host, const SandboxProfile& profile, std::string& why) {
    auto refuse = [&](const std::string& what) {
        why = "profile \"" + profile.name + "\" cannot be enforced by this host's systemd: " + what;
        return false;
    };
    const bool v1 = host.layout == CgroupLayout::Hybrid || host.layout == CgroupLayout::Legacy;
    const char* where = v1 ? "no cgroup v1 hierarchy of it is mounted"
                           : "systemd's cgroup v2 root does not offer it";
    if (profile.memory_max) {
        if (!host.memory) return refuse(std::string("memory limit: the memory controller is not available (") + where + ")");
        // MemorySwapMax= exists on v2 only; a v1 limit (memory.limit_in_bytes) lets the
        // session spill into swap, past its limit.
        if (v1 && host.swap) return refuse("memory limit: swap is on and cgroup v1 cannot limit a unit's swap");
    }
    if (profile.tasks_max && !host.pids)
        return refuse(std::string("task limit: the pids controller is not available (") + where + ")");
    if (profile.cpu_quota_percent && !host.cpu)
        return refuse(std::string("CPU quota: the cpu controller is not available (") + where + ")");
    // ProtectSystem=strict arrived in systemd 232, along with ReadWritePaths= and
    // InaccessiblePaths=; PrivateNetwork= and PrivateTmp= are older.
    if (profile.confines_filesystem() && host.systemd_version < 232)
        return refuse("read-only file system: systemd " + std::to_string(host.systemd_version) +
                      " has no ProtectSystem=strict (232 or later)");
    if (profile.tasks_max && *profile.tasks_max == 0) return refuse("a task limit of 0 would not start");
    if (profile.cpu_quota_percent && *profile.cpu_quota_percent == 0) return refuse("a CPU quota of 0%");
    return true;
}

std::string describe(const HostEnforcement& host) {
    std::ostringstream out;
    out << "systemd " << host.systemd_version << ", cgroups ";
    switch (host.layout) {
        case CgroupLayout::Unified: out << "unified (v2)"; break;
        case CgroupLayout::Hybrid: out << "hybrid (v1 controllers, v2 at " << host.unified_mount << ")"; break;
        case CgroupLayout::Legacy: out << "legacy (v1)"; break;
        case CgroupLayout::None: out << "not mounted"; break;
    }
    out << "; enforced:";
    if (host.memory) out << " memory";
    if (host.pids) out << " pids";
    if (host.cpu) out << " cpu";
    if (host.io) out << " io";
    if (!host.memory && !host.pids && !host.cpu) out << " none of memory, pids, cpu";
    if (host.swap) out << "; swap on";
    return out.str();
}

}  // namespace ptyvisor::backends::systemd
