#include "backends/direct/cgroup_limits.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>

#include "common/process.h"
#include "common/unique_fd.h"

namespace ptyvisor::backends::direct {
namespace {

int write_file(const std::string& path, const std::string& value) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) return -errno;
    if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) return -errno;
    return 0;
}

bool mkdir_p(const std::string& dir) { return ::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST; }

std::optional<std::uint64_t> number(const std::optional<std::string>& text) {
    if (!text) return std::nullopt;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
    if (ec != std::errc{}) return std::nullopt;
    (void)end;
    return v;
}

std::optional<std::uint64_t> file_number(const std::string& path) { return number(read_small_file(path)); }

std::optional<std::uint64_t> file_key(const std::string& path, const std::string& key) {
    const auto text = read_small_file(path);
    if (!text) return std::nullopt;
    return keyed_value(*text, key);
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string item;
    std::istringstream in(s);
    while (std::getline(in, item, sep)) out.push_back(item);
    return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
    for (const auto& x : v)
        if (x == s) return true;
    return false;
}

// Our own path in the v1 hierarchy that carries `controller` (from /proc/self/cgroup).
std::optional<std::string> own_v1_path(const std::string& proc_cgroup, const std::string& controller) {
    for (const auto& line : split(proc_cgroup, '\n')) {
        const auto a = line.find(':');
        const auto b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        if (contains(split(line.substr(a + 1, b - a - 1), ','), controller)) return line.substr(b + 1);
    }
    return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> keyed_value(const std::string& text, const std::string& key) {
    for (const auto& line : split(text, '\n')) {
        if (line.size() <= key.size() || line.compare(0, key.size(), key) != 0 || line[key.size()] != ' ') continue;
        return number(line.substr(key.size() + 1));
    }
    return std::nullopt;
}

std::pair<std::uint64_t, std::uint64_t> io_stat_bytes(const std::string& text) {
    std::uint64_t r = 0, w = 0;
    for (const auto& line : split(text, '\n'))
        for (const auto& field : split(line, ' ')) {
            if (field.rfind("rbytes=", 0) == 0) r += number(field.substr(7)).value_or(0);
            if (field.rfind("wbytes=", 0) == 0) w += number(field.substr(7)).value_or(0);
        }
    return {r, w};
}

CgroupControllers CgroupControllers::discover(const std::string& v2_instance, const std::string& instance) {
    CgroupControllers c;
    c.v2_instance_ = v2_instance;
    bool v2_memory = false, v2_pids = false, v2_cpu = false;
    if (!v2_instance.empty()) {
        // Enable the controllers down to the instance directory: a domain controller reaches
        // a session only if every ancestor's subtree_control enables it. Our own cgroup is
        // ours only where it has been delegated to us (Delegate=yes, or the root on a
        // machine without systemd); where it is not, or holds processes (the "no internal
        // processes" rule), the write fails and the controller stays unavailable: check()
        // then says so, rather than running a session unlimited.
        const auto mount = cgroup2_mount();
        const auto own = own_cgroup();
        std::vector<std::string> dirs;
        if (mount && own) {
            const std::string base = *mount + (*own == "/" ? std::string() : *own);
            dirs = {base, base + "/ptyvisor.sessions", v2_instance};
        }
        for (const auto& dir : dirs)
            for (const char* ctl : {"+memory", "+pids", "+cpu", "+io"})
                (void)write_file(dir + "/cgroup.subtree_control", ctl);
        const auto enabled = split(read_small_file(v2_instance + "/cgroup.subtree_control").value_or(""), ' ');
        auto on = [&](const char* n) {
            for (auto e : enabled) {
                while (!e.empty() && e.back() == '\n') e.pop_back();
                if (e == n) return true;
            }
            return false;
        };
        v2_memory = on("memory");
        v2_pids = on("pids");
        v2_cpu = on("cpu");
        c.v2_io_ = on("io");
    }

    // The v1 hierarchies (a hybrid host): each mount of type "cgroup" with its controllers.
    const auto mounts = read_small_file("/proc/self/mounts").value_or("");
    const auto proc_cgroup = read_small_file("/proc/self/cgroup").value_or("");
    for (const auto& line : split(mounts, '\n')) {
        const auto f = split(line, ' ');
        if (f.size() < 4 || f[2] != "cgroup") continue;
        const auto opts = split(f[3], ',');
        V1 h;
        h.memory = contains(opts, "memory") && !v2_memory;
        h.pids = contains(opts, "pids") && !v2_pids;
        h.cpu = contains(opts, "cpu") && !v2_cpu;
        // CPU time from cpuacct unless the v2 cpu controller limits (and so counts) it.
        h.cpuacct = contains(opts, "cpuacct") && !v2_cpu;
        if (!h.memory && !h.pids && !h.cpu && !h.cpuacct) continue;
        const char* ctl = h.memory ? "memory" : h.pids ? "pids" : h.cpu ? "cpu" : "cpuacct";
        const auto own = own_v1_path(proc_cgroup, ctl);
        if (!own) continue;
        const std::string sessions = f[1] + (*own == "/" ? std::string() : *own) + "/ptyvisor.sessions";
        h.instance = sessions + "/" + instance;
        if (!mkdir_p(sessions) || !mkdir_p(h.instance)) continue;  // not ours to use
        if (h.memory && ::access((h.instance + "/memory.limit_in_bytes").c_str(), W_OK) < 0) h.memory = false;
        if (h.memory) c.memsw_ = ::access((h.instance + "/memory.memsw.limit_in_bytes").c_str(), W_OK) == 0;
        c.v1_instances_.push_back(h.instance);
        c.v1_.push_back(std::move(h));
    }
    auto layer = [&](bool v2, bool V1::*field) {
        if (v2) return Layer::V2;
        for (const auto& h : c.v1_)
            if (h.*field) return Layer::V1;
        return Layer::None;
    };
    c.memory_ = layer(v2_memory, &V1::memory);
    c.pids_ = layer(v2_pids, &V1::pids);
    c.cpu_ = layer(v2_cpu, &V1::cpu);
    c.v2_swap_ = v2_memory && ::access((v2_instance + "/memory.swap.max").c_str(), F_OK) == 0;
    return c;
}

CgroupControllers CgroupControllers::pure_v2(const std::string& v2_instance, bool swap, bool io) {
    CgroupControllers c;
    c.v2_instance_ = v2_instance;
    c.memory_ = c.pids_ = c.cpu_ = Layer::V2;
    c.v2_swap_ = swap;
    c.v2_io_ = io;
    return c;
}

bool CgroupControllers::check(const SandboxProfile& p, std::string& why) const {
    if (p.memory_max && memory_ == Layer::None) {
        why = "memory_max needs the memory controller: neither cgroup v2's memory nor a v1 memory hierarchy is available";
        return false;
    }
    if (p.tasks_max && pids_ == Layer::None) {
        why = "tasks_max needs the pids controller: neither cgroup v2's pids nor a v1 pids hierarchy is available";
        return false;
    }
    if (p.cpu_quota_percent && cpu_ == Layer::None) {
        why = "cpu_quota_percent needs the cpu controller: neither cgroup v2's cpu nor a v1 cpu hierarchy is available";
        return false;
    }
    if (p.cpu_quota_percent && *p.cpu_quota_percent == 0) {
        why = "cpu_quota_percent must be at least 1";
        return false;
    }
    return true;
}

int CgroupControllers::create(const std::string& unit, const SandboxProfile* profile, SessionCgroups& out,
                              std::string& why) const {
    for (const auto& h : v1_) {
        const std::string dir = h.instance + "/" + unit;
        if (::mkdir(dir.c_str(), 0755) < 0) {
            const int e = errno;
            why = "cannot create " + dir + ": " + std::strerror(e);
            remove_v1(out);
            out.v1.clear();
            return -e;
        }
        out.v1.push_back(dir);
        if (h.memory) out.memory_v1 = dir;
        if (h.pids) out.pids_v1 = dir;
        if (h.cpu) out.cpu_v1 = dir;
        if (h.cpuacct) out.cpuacct_v1 = dir;
    }
    if (!profile) return 0;
    std::vector<std::pair<std::string, std::string>> writes;
    if (profile->memory_max) {
        const auto v = std::to_string(*profile->memory_max);
        if (memory_ == Layer::V2) {
            writes.emplace_back(out.v2 + "/memory.max", v);
            // Without it the kernel would page the session out to swap instead of ending it:
            // memory_max would bound RAM only, and a hog could fill the machine's swap.
            if (v2_swap_) writes.emplace_back(out.v2 + "/memory.swap.max", "0");
        } else {
            writes.emplace_back(out.memory_v1 + "/memory.limit_in_bytes", v);
            // memsw is memory + swap: equal to the limit, swap is none (as memory.swap.max 0).
            if (memsw_) writes.emplace_back(out.memory_v1 + "/memory.memsw.limit_in_bytes", v);
        }
    }
    if (profile->tasks_max) {
        const auto v = std::to_string(*profile->tasks_max);
        writes.emplace_back((pids_ == Layer::V2 ? out.v2 : out.pids_v1) + "/pids.max", v);
    }
    if (profile->cpu_quota_percent) {
        // Percent of one CPU per 100 ms period; the kernel's smallest quota is 1 ms.
        const auto quota = std::to_string(std::max<std::uint64_t>(1000, std::uint64_t{*profile->cpu_quota_percent} * 1000));
        if (cpu_ == Layer::V2) {
            writes.emplace_back(out.v2 + "/cpu.max", quota + " 100000");
        } else {
            writes.emplace_back(out.cpu_v1 + "/cpu.cfs_period_us", "100000");
            writes.emplace_back(out.cpu_v1 + "/cpu.cfs_quota_us", quota);
        }
    }
    for (const auto& [path, value] : writes)
        if (const int r = write_file(path, value); r < 0) {
            why = "cannot write " + value + " to " + path + ": " + std::strerror(-r);
            remove_v1(out);
            out.v1.clear();
            return r;
        }
    return 0;
}

SessionCgroups CgroupControllers::existing(const std::string& unit, const std::string& v2) const {
    SessionCgroups out;
    out.v2 = v2;
    for (const auto& h : v1_) {
        const std::string dir = h.instance + "/" + unit;
        if (::access(dir.c_str(), F_OK) < 0) continue;
        out.v1.push_back(dir);
        if (h.memory) out.memory_v1 = dir;
        if (h.pids) out.pids_v1 = dir;
        if (h.cpu) out.cpu_v1 = dir;
        if (h.cpuacct) out.cpuacct_v1 = dir;
    }
    return out;
}

SessionUsage read_usage(const SessionCgroups& d) {
    SessionUsage u;
    if (!d.cpuacct_v1.empty()) {
        if (const auto ns = file_number(d.cpuacct_v1 + "/cpuacct.usage")) u.cpu_usec = *ns / 1000;
    } else if (!d.v2.empty()) {
        u.cpu_usec = file_key(d.v2 + "/cpu.stat", "usage_usec");
    }
    if (!d.memory_v1.empty()) {
        u.memory_current = file_number(d.memory_v1 + "/memory.usage_in_bytes");
        u.memory_peak = file_number(d.memory_v1 + "/memory.max_usage_in_bytes");
        u.oom_kills = file_key(d.memory_v1 + "/memory.oom_control", "oom_kill");
    } else if (!d.v2.empty()) {
        u.memory_current = file_number(d.v2 + "/memory.current");
        u.memory_peak = file_number(d.v2 + "/memory.peak");
        u.oom_kills = file_key(d.v2 + "/memory.events", "oom_kill");
    }
    if (!d.pids_v1.empty()) {
        u.tasks_current = file_number(d.pids_v1 + "/pids.current");
        u.tasks_limit_hits = file_key(d.pids_v1 + "/pids.events", "max");
        // v1 keeps no peak: nullopt, never a figure we did not read from the kernel.
    } else if (!d.v2.empty()) {
        u.tasks_current = file_number(d.v2 + "/pids.current");
        u.tasks_peak = file_number(d.v2 + "/pids.peak");
        u.tasks_limit_hits = file_key(d.v2 + "/pids.events", "max");
    }
    if (!d.v2.empty())
        if (const auto io = read_small_file(d.v2 + "/io.stat")) {
            const auto [r, w] = io_stat_bytes(*io);
            u.io_read_bytes = r;
            u.io_write_bytes = w;
        }
    return u;
}

int remove_v1(const SessionCgroups& d) {
    int first = 0;
    for (const auto& dir : d.v1)
        if (::rmdir(dir.c_str()) < 0 && errno != ENOENT && first == 0) first = -errno;
    return first;
}

}  // namespace ptyvisor::backends::direct
