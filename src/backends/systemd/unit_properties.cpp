#include "backends/systemd/unit_properties.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace ptyvisor::backends::systemd {
namespace {

constexpr std::uint64_t kInfinity = std::numeric_limits<std::uint64_t>::max();
constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

std::string trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return std::string(s);
}

// A non-negative decimal number, possibly with a fraction; the rest of `s` goes to `rest`.
bool parse_decimal(std::string_view s, double& value, std::string_view& rest) {
    size_t i = 0;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
    if (i == 0) return false;
    const std::string number(s.substr(0, i));
    if (std::count(number.begin(), number.end(), '.') > 1 || number == ".") return false;
    char* end = nullptr;
    value = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size() || !std::isfinite(value)) return false;
    rest = s.substr(i);
    return true;
}

bool parse_integer(std::string_view s, std::int64_t& value) {
    if (s.empty()) return false;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    return ec == std::errc{} && end == s.data() + s.size();
}

// Bytes with an optional binary suffix (K, M, G, T; base 1024, as systemd), or "infinity".
bool parse_bytes(std::string_view s, std::uint64_t& out) {
    if (s == "infinity") { out = kInfinity; return true; }
    double v = 0;
    std::string_view rest;
    if (!parse_decimal(s, v, rest)) return false;
    double mult = 1;
    if (!rest.empty()) {
        switch (rest.front()) {
            case 'K': mult = 1024.0; break;
            case 'M': mult = 1024.0 * 1024; break;
            case 'G': mult = 1024.0 * 1024 * 1024; break;
            case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
            default: return false;
        }
        rest.remove_prefix(1);
        if (rest == "B") rest.remove_prefix(1);
        if (!rest.empty()) return false;
    }
    const double bytes = v * mult;
    if (bytes >= 1.8e19) return false;
    out = static_cast<std::uint64_t>(bytes);
    return true;
}

bool parse_count(std::string_view s, std::uint64_t& out) {
    if (s == "infinity") { out = kInfinity; return true; }
    std::int64_t v = 0;
    if (!parse_integer(s, v) || v < 0) return false;
    out = static_cast<std::uint64_t>(v);
    return true;
}

// A time span in seconds by default, or with a unit: us, ms, s, sec, min, m, h, d.
bool parse_timespan(std::string_view s, std::uint64_t& usec) {
    if (s == "infinity") { usec = kInfinity; return true; }
    double v = 0;
    std::string_view rest;
    if (!parse_decimal(s, v, rest)) return false;
    double mult = 1e6;
    if (rest.empty() || rest == "s" || rest == "sec") mult = 1e6;
    else if (rest == "us" || rest == "usec") mult = 1;
    else if (rest == "ms" || rest == "msec") mult = 1e3;
    else if (rest == "min" || rest == "m") mult = 60e6;
    else if (rest == "h") mult = 3600e6;
    else if (rest == "d") mult = 86400e6;
    else return false;
    const double total = v * mult;
    if (total >= 1.8e19) return false;
    usec = static_cast<std::uint64_t>(total);
    return true;
}

bool parse_bool(std::string_view s, bool& out) {
    if (s == "yes" || s == "true" || s == "on" || s == "1") { out = true; return true; }
    if (s == "no" || s == "false" || s == "off" || s == "0") { out = false; return true; }
    return false;
}

enum class Kind { Bytes, Count, Bool, Weight, Nice, OomAdjust, CpuQuota, Timespan, Choice };

struct Spec {
    const char* name;
    const char* dbus_name;
    Kind kind;
    std::vector<const char*> choices = {};
};

const std::vector<Spec>& table() {
    static const std::vector<Spec> specs = {
        {"MemoryMax", "MemoryMax", Kind::Bytes},
        {"MemoryHigh", "MemoryHigh", Kind::Bytes},
        {"MemorySwapMax", "MemorySwapMax", Kind::Bytes},
        {"TasksMax", "TasksMax", Kind::Count},
        {"CPUQuota", "CPUQuotaPerSecUSec", Kind::CpuQuota},
        {"CPUWeight", "CPUWeight", Kind::Weight},
        {"IOWeight", "IOWeight", Kind::Weight},
        {"RuntimeMaxSec", "RuntimeMaxUSec", Kind::Timespan},
        {"NoNewPrivileges", "NoNewPrivileges", Kind::Bool},
        {"PrivateTmp", "PrivateTmp", Kind::Bool},
        {"PrivateDevices", "PrivateDevices", Kind::Bool},
        {"PrivateNetwork", "PrivateNetwork", Kind::Bool},
        {"ProtectKernelTunables", "ProtectKernelTunables", Kind::Bool},
        {"ProtectKernelModules", "ProtectKernelModules", Kind::Bool},
        {"ProtectKernelLogs", "ProtectKernelLogs", Kind::Bool},
        {"ProtectControlGroups", "ProtectControlGroups", Kind::Bool},
        {"ProtectClock", "ProtectClock", Kind::Bool},
        {"ProtectHostname", "ProtectHostname", Kind::Bool},
        {"RestrictRealtime", "RestrictRealtime", Kind::Bool},
        {"RestrictSUIDSGID", "RestrictSUIDSGID", Kind::Bool},
        {"LockPersonality", "LockPersonality", Kind::Bool},
        {"ProtectSystem", "ProtectSystem", Kind::Choice, {"no", "yes", "full", "strict"}},
        {"ProtectHome", "ProtectHome", Kind::Choice, {"no", "yes", "read-only", "tmpfs"}},
        {"LimitCORE", "LimitCORE", Kind::Bytes},
        {"LimitFSIZE", "LimitFSIZE", Kind::Bytes},
        {"LimitAS", "LimitAS", Kind::Bytes},
        {"LimitNOFILE", "LimitNOFILE", Kind::Count},
        {"LimitNPROC", "LimitNPROC", Kind::Count},
        {"Nice", "Nice", Kind::Nice},
        {"OOMScoreAdjust", "OOMScoreAdjust", Kind::OomAdjust},
    };
    return specs;
}

// The sandbox every session gets whatever the configuration says (append_all puts it after
// the configured properties, so systemd keeps these values). The admin may tighten a session
// further; turning one of these off is refused when the configuration is loaded, loudly,
// rather than accepted and silently overridden.
bool is_enforced_sandbox_property(std::string_view name) {
    return name == "NoNewPrivileges" || name == "RestrictSUIDSGID";
}

int append_enforced_sandbox(sd_bus_message* m) {
    int r = 0;
    // no_new_privs: setuid/setgid bits and file capabilities grant nothing on execve.
    if ((r = sd_bus_message_append(m, "(sv)", "NoNewPrivileges", "b", 1)) < 0) return r;
    // No capability can ever be regained, whatever runs in the session.
    if ((r = sd_bus_message_append(m, "(sv)", "CapabilityBoundingSet", "t", std::uint64_t{0})) < 0)
        return r;
    // Nor can the session create setuid/setgid files for someone outside it to run.
    return sd_bus_message_append(m, "(sv)", "RestrictSUIDSGID", "b", 1);
}

bool translate_one(const Spec& spec, const std::string& raw, PropertyValue& out, std::string& why) {
    const std::string v = trim(raw);
    out.name = spec.dbus_name;
    auto bad = [&](const char* expected) {
        why = std::string("property ") + spec.name + "=" + raw + ": expected " + expected;
        return false;
    };
    if (bool on = true; is_enforced_sandbox_property(spec.name) && parse_bool(v, on) && !on) {
        why = std::string("property ") + spec.name + "=" + raw +
              ": sessions always run with it on; it cannot be turned off";
        return false;
    }
    switch (spec.kind) {
        case Kind::Bytes: {
            std::uint64_t b = 0;
            if (!parse_bytes(v, b)) return bad("bytes with an optional K, M, G or T suffix, or infinity");
            out.value = b;
            return true;
        }
        case Kind::Count: {
            std::uint64_t c = 0;
            if (!parse_count(v, c)) return bad("a non-negative integer or infinity");
            out.value = c;
            return true;
        }
        case Kind::Weight: {
            std::uint64_t c = 0;
            if (!parse_count(v, c) || c < 1 || c > 10000) return bad("an integer from 1 to 10000");
            out.value = c;
            return true;
        }
        case Kind::Bool: {
            bool b = false;
            if (!parse_bool(v, b)) return bad("yes or no");
            out.value = b;
            return true;
        }
        case Kind::Nice:
        case Kind::OomAdjust: {
            std::int64_t n = 0;
            const std::int64_t lo = spec.kind == Kind::Nice ? -20 : -1000;
            const std::int64_t hi = spec.kind == Kind::Nice ? 19 : 1000;
            if (!parse_integer(v, n) || n < lo || n > hi)
                return bad(spec.kind == Kind::Nice ? "an integer from -20 to 19"
                                                   : "an integer from -1000 to 1000");
            out.value = static_cast<std::int32_t>(n);
            return true;
        }
        case Kind::CpuQuota: {
            double pct = 0;
            std::string_view rest;
            if (!parse_decimal(v, pct, rest) || rest != "%" || pct <= 0 || pct > 1e6)
                return bad("a percentage such as 50%");
            // 100% is one CPU: 1 s of CPU time per second.
            out.value = static_cast<std::uint64_t>(pct * 10000.0);
            return true;
        }
        case Kind::Timespan: {
            std::uint64_t us = 0;
            if (!parse_timespan(v, us) || us == 0)
                return bad("a positive time span such as 30, 500ms, 5min or infinity");
            out.value = us;
            return true;
        }
        case Kind::Choice: {
            for (const char* c : spec.choices)
                if (v == c) { out.value = std::string(v); return true; }
            std::string list;
            for (const char* c : spec.choices) list += (list.empty() ? "" : ", ") + std::string(c);
            return bad(("one of " + list).c_str());
        }
    }
    return bad("a value");
}

// The executable bits that apply to this account, as the kernel would judge them.
bool may_execute(const struct stat& st, uid_t uid, gid_t gid, const std::vector<gid_t>& groups) {
    if (!S_ISREG(st.st_mode)) return false;
    if (uid == 0) return (st.st_mode & 0111) != 0;
    if (st.st_uid == uid) return (st.st_mode & S_IXUSR) != 0;
    if (st.st_gid == gid || std::find(groups.begin(), groups.end(), st.st_gid) != groups.end())
        return (st.st_mode & S_IXGRP) != 0;
    return (st.st_mode & S_IXOTH) != 0;
}

std::string join_path(const std::string& dir, const std::string& name) {
    if (dir.empty()) return name;
    if (dir.back() == '/') return dir + name;
    return dir + "/" + name;
}

// "/a/./b/../c" -> "/a/c"; systemd wants normalized absolute paths.
std::string normalize(const std::string& path) {
    std::vector<std::string> parts;
    size_t i = 0;
    while (i <= path.size()) {
        const size_t j = std::min(path.find('/', i), path.size());
        const std::string part = path.substr(i, j - i);
        if (part == "..") {
            if (!parts.empty()) parts.pop_back();
        } else if (!part.empty() && part != ".") {
            parts.push_back(part);
        }
        i = j + 1;
    }
    std::string out;
    for (const auto& p : parts) out += "/" + p;
    return out.empty() ? "/" : out;
}

// (name, <as>): ReadWritePaths=, InaccessiblePaths= (TemporaryFileSystem=: a(ss), BindPaths=:
// a(ssbt), below). systemd appends a non-empty list to
// what the unit already has (the agent's copied paths stay), and resets it on an empty one:
// an empty list is never sent.
int append_string_list(sd_bus_message* m, const std::string& name, const std::vector<std::string>& items) {
    if (items.empty()) return 0;
    if (name == "TemporaryFileSystem") {
        // a(ss): each path gets an empty tmpfs of the unit's own; nosuid/nodev as systemd's
        // PrivateTmp= mounts have.
        int r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0) r = sd_bus_message_append(m, "s", name.c_str());
        if (r >= 0) r = sd_bus_message_open_container(m, 'v', "a(ss)");
        if (r >= 0) r = sd_bus_message_open_container(m, 'a', "(ss)");
        for (const auto& s : items)
            if (r >= 0) r = sd_bus_message_append(m, "(ss)", s.c_str(), "mode=1777,nosuid,nodev");
        if (r >= 0) r = sd_bus_message_close_container(m);
        if (r >= 0) r = sd_bus_message_close_container(m);
        if (r >= 0) r = sd_bus_message_close_container(m);
        return r;
    }
    if (name == "BindPaths") {
        // a(ssbt): source, destination (the same path), ignore a missing source ("-"),
        // mount flags (MS_REC: what is mounted beneath it comes along).
        int r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0) r = sd_bus_message_append(m, "s", name.c_str());
        if (r >= 0) r = sd_bus_message_open_container(m, 'v', "a(ssbt)");
        if (r >= 0) r = sd_bus_message_open_container(m, 'a', "(ssbt)");
        for (const auto& s : items) {
            const bool optional = !s.empty() && s.front() == '-';
            const std::string path = optional ? s.substr(1) : s;
            if (r >= 0)
                r = sd_bus_message_append(m, "(ssbt)", path.c_str(), path.c_str(), static_cast<int>(optional),
                                          std::uint64_t{MS_REC});
        }
        if (r >= 0) r = sd_bus_message_close_container(m);
        if (r >= 0) r = sd_bus_message_close_container(m);
        if (r >= 0) r = sd_bus_message_close_container(m);
        return r;
    }
    int r = sd_bus_message_open_container(m, 'r', "sv");
    if (r >= 0) r = sd_bus_message_append(m, "s", name.c_str());
    if (r >= 0) r = sd_bus_message_open_container(m, 'v', "as");
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "s");
    for (const auto& s : items)
        if (r >= 0) r = sd_bus_message_append(m, "s", s.c_str());
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_close_container(m);
    return r;
}

int append_property(sd_bus_message* m, const PropertyValue& p) {
    return std::visit(
        [&](const auto& v) -> int {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, bool>)
                return sd_bus_message_append(m, "(sv)", p.name.c_str(), "b", static_cast<int>(v));
            else if constexpr (std::is_same_v<T, std::uint64_t>)
                return sd_bus_message_append(m, "(sv)", p.name.c_str(), "t", v);
            else if constexpr (std::is_same_v<T, std::int32_t>)
                return sd_bus_message_append(m, "(sv)", p.name.c_str(), "i", v);
            else if constexpr (std::is_same_v<T, std::string>)
                return sd_bus_message_append(m, "(sv)", p.name.c_str(), "s", v.c_str());
            else
                return append_string_list(m, p.name, v);
        },
        p.value);
}

int append_string_array(sd_bus_message* m, const std::vector<std::string>& items, bool escape) {
    int r = sd_bus_message_open_container(m, 'a', "s");
    if (r < 0) return r;
    for (const auto& s : items) {
        r = sd_bus_message_append(m, "s", escape ? escape_exec_argument(s).c_str() : s.c_str());
        if (r < 0) return r;
    }
    return sd_bus_message_close_container(m);
}

// The settings whose names are in `names` among the (sv) pairs of `from` (a GetAll reply),
// copied as they are: what systemd reads back is what it accepts for a transient unit.
// Returns whether any of PrivateTmp, PrivateNetwork, PrivateIPC is on in `joins`.
int append_agent_sandbox(sd_bus_message* m, sd_bus_message* from, bool& joins) {
    int r = sd_bus_message_rewind(from, 1);
    if (r < 0) return r;
    if ((r = sd_bus_message_enter_container(from, 'a', "{sv}")) < 0) return r;
    const auto& names = agent_sandbox_properties();
    while ((r = sd_bus_message_enter_container(from, 'e', "sv")) > 0) {
        const char* name = nullptr;
        if ((r = sd_bus_message_read(from, "s", &name)) < 0) return r;
        const std::string_view n(name);
        if (std::find(names.begin(), names.end(), n) == names.end()) {
            r = sd_bus_message_skip(from, "v");
        } else if (n == "PrivateTmp" || n == "PrivateNetwork" || n == "PrivateIPC") {
            int on = 0;
            if ((r = sd_bus_message_read(from, "v", "b", &on)) < 0) return r;
            joins = joins || on;
            r = sd_bus_message_append(m, "(sv)", name, "b", on);
        } else {
            if ((r = sd_bus_message_open_container(m, 'r', "sv")) < 0) return r;
            if ((r = sd_bus_message_append(m, "s", name)) < 0) return r;
            if ((r = sd_bus_message_copy(m, from, 0)) < 0) return r;
            r = sd_bus_message_close_container(m);
        }
        if (r < 0) return r;
        if ((r = sd_bus_message_exit_container(from)) < 0) return r;
    }
    if (r < 0) return r;
    return sd_bus_message_exit_container(from);
}

// systemd's name of each resource limit, indexed by RLIMIT_*.
constexpr const char* kLimitNames[RLIM_NLIMITS] = {
    "LimitCPU", "LimitFSIZE", "LimitDATA",   "LimitSTACK", "LimitCORE",       "LimitRSS",
    "LimitNPROC", "LimitNOFILE", "LimitMEMLOCK", "LimitAS", "LimitLOCKS",  "LimitSIGPENDING",
    "LimitMSGQUEUE", "LimitNICE", "LimitRTPRIO", "LimitRTTIME"};
static_assert(RLIMIT_NPROC == 6 && RLIMIT_NOFILE == 7 && RLIMIT_RTTIME == 15, "kLimitNames follows RLIMIT_*");

// The agent's limits, hard and soft, but those the configuration sets (it wins).
int append_agent_limits(sd_bus_message* m, const ResourceLimits& limits, const std::vector<PropertyValue>& extra) {
    for (std::size_t i = 0; i < limits.size(); ++i) {
        const std::string name = kLimitNames[i];
        const bool configured = std::any_of(extra.begin(), extra.end(), [&](const PropertyValue& p) {
            return p.name == name || p.name == name + "Soft";
        });
        if (configured) continue;
        int r = sd_bus_message_append(m, "(sv)", name.c_str(), "t", static_cast<std::uint64_t>(limits[i].rlim_max));
        if (r >= 0)
            r = sd_bus_message_append(m, "(sv)", (name + "Soft").c_str(), "t", static_cast<std::uint64_t>(limits[i].rlim_cur));
        if (r < 0) return r;
    }
    return 0;
}

int append_all(sd_bus_message* m, const TransientService& s) {
    int r = 0;
    auto str = [&](const char* name, const std::string& value) {
        return sd_bus_message_append(m, "(sv)", name, "s", value.c_str());
    };
    if ((r = str("Description", s.description)) < 0) return r;
    if ((r = str("Type", "exec")) < 0) return r;
    // Hold a reference to the unit from our bus connection: systemd does not garbage-collect
    // it, even when it is inactive or failed, until we call UnrefUnit (or disconnect). That is
    // what makes reading ExecMainCode/ExecMainStatus/Result after the exit race-free.
    if ((r = sd_bus_message_append(m, "(sv)", "AddRef", "b", 1)) < 0) return r;
    if ((r = str("CollectMode", "inactive-or-failed")) < 0) return r;
    if ((r = str("Slice", s.slice)) < 0) return r;
    // Every session's usage is read from its cgroup (unit_usage.h): on a v1 host systemd puts
    // a unit into the memory, pids and blkio hierarchies only when asked to account there.
    for (const char* name : {"CPUAccounting", "MemoryAccounting", "TasksAccounting", "IOAccounting"})
        if ((r = sd_bus_message_append(m, "(sv)", name, "b", 1)) < 0) return r;
    if ((r = str("KillMode", "control-group")) < 0) return r;
    if ((r = sd_bus_message_append(m, "(sv)", "SendSIGHUP", "b", 1)) < 0) return r;
    if ((r = sd_bus_message_append(m, "(sv)", "IgnoreSIGPIPE", "b", 0)) < 0) return r;
    if ((r = sd_bus_message_append(m, "(sv)", "TimeoutStopUSec", "t", s.timeout_stop_usec)) < 0)
        return r;
    if ((r = str("User", s.user)) < 0) return r;
    if ((r = str("Group", s.group)) < 0) return r;
    if ((r = str("WorkingDirectory", s.working_directory)) < 0) return r;

    if ((r = sd_bus_message_open_container(m, 'r', "sv")) < 0) return r;
    if ((r = sd_bus_message_append(m, "s", "Environment")) < 0) return r;
    if ((r = sd_bus_message_open_container(m, 'v', "as")) < 0) return r;
    if ((r = append_string_array(m, s.env, false)) < 0) return r;
    if ((r = sd_bus_message_close_container(m)) < 0) return r;
    if ((r = sd_bus_message_close_container(m)) < 0) return r;

    for (const char* name : {"StandardInputFileDescriptor", "StandardOutputFileDescriptor",
                             "StandardErrorFileDescriptor"})
        if ((r = sd_bus_message_append(m, "(sv)", name, "h", s.tty_fd)) < 0) return r;
    if ((r = str("TTYPath", s.tty_path)) < 0) return r;

    // ExecStart: a(sasb) = [(path, argv, ignore_failure)]
    if ((r = sd_bus_message_open_container(m, 'r', "sv")) < 0) return r;
    if ((r = sd_bus_message_append(m, "s", "ExecStart")) < 0) return r;
    if ((r = sd_bus_message_open_container(m, 'v', "a(sasb)")) < 0) return r;
    if ((r = sd_bus_message_open_container(m, 'a', "(sasb)")) < 0) return r;
    if ((r = sd_bus_message_open_container(m, 'r', "sasb")) < 0) return r;
    if ((r = sd_bus_message_append(m, "s", s.exec_path.c_str())) < 0) return r;
    if ((r = append_string_array(m, s.argv, true)) < 0) return r;
    if ((r = sd_bus_message_append(m, "b", 0)) < 0) return r;
    for (int i = 0; i < 4; ++i)
        if ((r = sd_bus_message_close_container(m)) < 0) return r;

    if (s.agent_properties) {
        bool joins = false;
        if ((r = append_agent_sandbox(m, s.agent_properties, joins)) < 0) return r;
        // Namespaces are joined only where both units have them private (systemd.unit(5)).
        if (joins && (r = sd_bus_message_append(m, "(sv)", "JoinsNamespaceOf", "as", 1,
                                                s.agent_unit.c_str())) < 0)
            return r;
    }
    for (const auto& p : s.extra)
        if ((r = append_property(m, p)) < 0) return r;
    if (s.limits && (r = append_agent_limits(m, *s.limits, s.extra)) < 0) return r;
    // Last, so that nothing before it can weaken it.
    return append_enforced_sandbox(m);
}

}  // namespace

bool translate_properties(const std::map<std::string, std::string>& properties,
                          std::vector<PropertyValue>& out, std::string& why) {
    out.clear();
    for (const auto& [name, value] : properties) {
        const auto& specs = table();
        const auto it = std::find_if(specs.begin(), specs.end(),
                                     [&](const Spec& s) { return name == s.name; });
        if (it == specs.end()) {
            std::string list;
            for (const auto& s : specs) list += (list.empty() ? "" : ", ") + std::string(s.name);
            why = "unsupported unit property \"" + name + "\" (supported: " + list + ")";
            return false;
        }
        PropertyValue p;
        if (!translate_one(*it, value, p, why)) return false;
        out.push_back(std::move(p));
    }
    return true;
}

bool validate_properties(const std::map<std::string, std::string>& properties, std::string& why) {
    std::vector<PropertyValue> ignored;
    return translate_properties(properties, ignored, why);
}

const std::vector<std::string_view>& agent_sandbox_properties() {
    static const std::vector<std::string_view> names = {
        "PrivateTmp", "PrivateDevices", "PrivateNetwork", "PrivateIPC", "PrivateUsers",
        "PrivateMounts", "ProtectSystem", "ProtectHome", "ProtectKernelTunables",
        "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock",
        "ProtectHostname", "ProtectProc", "ProcSubset", "RestrictRealtime", "LockPersonality",
        "MemoryDenyWriteExecute", "RestrictNamespaces", "SystemCallFilter",
        "SystemCallArchitectures", "RestrictAddressFamilies", "ReadWritePaths", "ReadOnlyPaths",
        "InaccessiblePaths",
    };
    return names;
}

std::vector<std::string> supported_properties() {
    std::vector<std::string> names;
    for (const auto& s : table()) names.emplace_back(s.name);
    return names;
}

std::string escape_exec_argument(std::string_view arg) {
    std::string out;
    out.reserve(arg.size());
    for (const char c : arg) {
        if (c == '$') out += '$';
        out += c;
    }
    return out;
}

bool resolve_executable(const std::string& name, const std::vector<std::string>& env,
                        const std::string& cwd_path, uid_t uid, gid_t gid,
                        const std::vector<gid_t>& groups, std::string& out, std::string& why) {
    if (name.empty()) {
        why = "empty command";
        return false;
    }
    auto usable = [&](const std::string& candidate) {
        struct stat st {};
        return ::stat(candidate.c_str(), &st) == 0 && may_execute(st, uid, gid, groups);
    };
    if (name.find('/') != std::string::npos) {
        const std::string candidate = normalize(name.front() == '/' ? name : join_path(cwd_path, name));
        if (!usable(candidate)) {
            why = "command not found: " + name;
            return false;
        }
        out = candidate;
        return true;
    }
    std::string path = kDefaultPath;
    for (const auto& e : env)
        if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
    size_t i = 0;
    while (i <= path.size()) {
        const size_t j = std::min(path.find(':', i), path.size());
        std::string dir = path.substr(i, j - i);
        i = j + 1;
        if (dir.empty()) dir = ".";  // an empty entry means the working directory
        if (dir.front() != '/') dir = join_path(cwd_path, dir);
        const std::string candidate = normalize(join_path(dir, name));
        if (usable(candidate)) {
            out = candidate;
            return true;
        }
    }
    why = "command not found: " + name;
    return false;
}

bool working_directory_path(int dir_fd, std::uint64_t dev, std::uint64_t ino, std::string& out,
                            std::string& why) {
    char link[64];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", dir_fd);
    std::string buf(4096, '\0');
    const ssize_t n = ::readlink(link, buf.data(), buf.size());
    if (n <= 0 || static_cast<size_t>(n) >= buf.size()) {
        why = "cannot resolve the working directory";
        return false;
    }
    buf.resize(static_cast<size_t>(n));
    struct stat st {};
    if (buf.front() != '/' || ::stat(buf.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        static_cast<std::uint64_t>(st.st_dev) != dev || static_cast<std::uint64_t>(st.st_ino) != ino) {
        why = "working directory changed";
        return false;
    }
    out = std::move(buf);
    return true;
}

MessagePtr build_start_transient_unit(sd_bus* bus, const TransientService& service,
                                      std::string& why) {
    sd_bus_message* raw = nullptr;
    int r = sd_bus_message_new_method_call(bus, &raw, "org.freedesktop.systemd1",
                                           "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager",
                                           "StartTransientUnit");
    MessagePtr m(raw);
    if (r < 0) {
        why = "cannot create StartTransientUnit call: " + describe_errno(r);
        return nullptr;
    }
    if ((r = sd_bus_message_append(m.get(), "ss", service.unit.c_str(), "fail")) < 0 ||
        (r = sd_bus_message_open_container(m.get(), 'a', "(sv)")) < 0 ||
        (r = append_all(m.get(), service)) < 0 ||
        (r = sd_bus_message_close_container(m.get())) < 0 ||
        (r = sd_bus_message_append(m.get(), "a(sa(sv))", 0)) < 0) {
        why = "cannot build StartTransientUnit call: " + describe_errno(r);
        return nullptr;
    }
    return m;
}

}  // namespace ptyvisor::backends::systemd
