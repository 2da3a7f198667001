#include "backends/systemd/unit_usage.h"

#include <charconv>
#include <vector>

#include "common/process.h"

namespace ptyvisor::backends::systemd {
namespace {

std::optional<std::uint64_t> number(std::string_view s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return v;
}

template <typename F>
void for_each_line(std::string_view text, F f) {
    while (!text.empty()) {
        const auto at = text.find('\n');
        f(text.substr(0, at));
        if (at == std::string_view::npos) break;
        text.remove_prefix(at + 1);
    }
}

void add(std::optional<std::uint64_t>& sum, std::uint64_t v) { sum = sum.value_or(0) + v; }

struct Reader {
    bool any = false;
    std::optional<std::string> file(const std::string& path) {
        auto text = read_small_file(path);
        if (text) any = true;
        return text;
    }
    std::optional<std::uint64_t> value(const std::string& path) {
        const auto text = file(path);
        return text ? number(*text) : std::nullopt;
    }
    std::optional<std::uint64_t> keyed(const std::string& path, std::string_view key) {
        const auto text = file(path);
        return text ? keyed_value(*text, key) : std::nullopt;
    }
};

}  // namespace

std::optional<std::uint64_t> keyed_value(std::string_view text, std::string_view key) {
    std::optional<std::uint64_t> out;
    for_each_line(text, [&](std::string_view line) {
        if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ' ')
            out = number(line.substr(key.size() + 1));
    });
    return out;
}

void io_stat_bytes(std::string_view text, std::optional<std::uint64_t>& read, std::optional<std::uint64_t>& write) {
    for_each_line(text, [&](std::string_view line) {
        // "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0"
        std::size_t at = line.find(' ');
        while (at != std::string_view::npos) {
            line.remove_prefix(at + 1);
            at = line.find(' ');
            const auto field = line.substr(0, at);
            if (field.starts_with("rbytes=")) {
                if (const auto v = number(field.substr(7))) add(read, *v);
            } else if (field.starts_with("wbytes=")) {
                if (const auto v = number(field.substr(7))) add(write, *v);
            }
        }
    });
}

void blkio_bytes(std::string_view text, std::optional<std::uint64_t>& read, std::optional<std::uint64_t>& write) {
    for_each_line(text, [&](std::string_view line) {
        // "8:0 Read 4096" per device and operation; a last "Total N" line sums all of them.
        const auto a = line.find(' ');
        if (a == std::string_view::npos || line.substr(0, a) == "Total") return;
        const auto rest = line.substr(a + 1);
        const auto b = rest.find(' ');
        if (b == std::string_view::npos) return;
        const auto op = rest.substr(0, b);
        const auto v = number(rest.substr(b + 1));
        if (!v) return;
        if (op == "Read") add(read, *v);
        else if (op == "Write") add(write, *v);
    });
    // A cgroup that did no block I/O lists no device: it did zero, not "unknown".
    if (!read) read = 0;
    if (!write) write = 0;
}

std::optional<SessionUsage> read_unit_usage(const HostEnforcement& host, const std::string& cgroup) {
    if (cgroup.empty() || cgroup.front() != '/' || cgroup.find("/..") != std::string::npos) return std::nullopt;
    SessionUsage u;
    Reader r;
    const std::string v2 = host.unified_mount.empty() ? std::string() : host.unified_mount + cgroup;
    if (!v2.empty())
        if (const auto usec = r.keyed(v2 + "/cpu.stat", "usage_usec")) u.cpu_usec = usec;
    if (host.layout == CgroupLayout::Unified) {
        u.memory_current = r.value(v2 + "/memory.current");
        u.memory_peak = r.value(v2 + "/memory.peak");
        u.oom_kills = r.keyed(v2 + "/memory.events", "oom_kill");
        u.tasks_current = r.value(v2 + "/pids.current");
        u.tasks_peak = r.value(v2 + "/pids.peak");
        u.tasks_limit_hits = r.keyed(v2 + "/pids.events", "max");
        if (const auto io = r.file(v2 + "/io.stat")) {
            u.io_read_bytes = 0;
            u.io_write_bytes = 0;
            io_stat_bytes(*io, u.io_read_bytes, u.io_write_bytes);
        }
    } else if (host.layout == CgroupLayout::Hybrid || host.layout == CgroupLayout::Legacy) {
        const std::string mem = "/sys/fs/cgroup/memory" + cgroup;
        const std::string pids = "/sys/fs/cgroup/pids" + cgroup;
        u.memory_current = r.value(mem + "/memory.usage_in_bytes");
        u.memory_peak = r.value(mem + "/memory.max_usage_in_bytes");
        u.oom_kills = r.keyed(mem + "/memory.oom_control", "oom_kill");
        u.tasks_current = r.value(pids + "/pids.current");
        u.tasks_peak = r.value(pids + "/pids.peak");
        u.tasks_limit_hits = r.keyed(pids + "/pids.events", "max");
        if (const auto io = r.file("/sys/fs/cgroup/blkio" + cgroup + "/blkio.throttle.io_service_bytes_recursive"))
            blkio_bytes(*io, u.io_read_bytes, u.io_write_bytes);
        if (!u.cpu_usec)
            if (const auto ns = r.value("/sys/fs/cgroup/cpuacct" + cgroup + "/cpuacct.usage")) u.cpu_usec = *ns / 1000;
    }
    if (!r.any) return std::nullopt;
    return u;
}

}  // namespace ptyvisor::backends::systemd
