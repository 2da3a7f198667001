#include "backends/systemd/profile_properties.h"

#include <algorithm>
#include <array>

namespace ptyvisor::backends::systemd {
namespace {

// Strictness order of ProtectSystem= and ProtectHome= values (systemd.exec(5)).
int system_rank(std::string_view v) {
    if (v == "strict") return 3;
    if (v == "full") return 2;
    if (v == "yes" || v == "true") return 1;
    return 0;
}
int home_rank(std::string_view v) {
    if (v == "yes" || v == "true") return 3;   // inaccessible
    if (v == "tmpfs") return 2;                // an empty read-only tmpfs over it
    if (v == "read-only") return 1;
    return 0;
}

std::string_view strip_prefixes(std::string_view p) {
    while (!p.empty() && (p.front() == '-' || p.front() == '+')) p.remove_prefix(1);
    return p;
}

PropertyValue* find(std::vector<PropertyValue>& props, std::string_view name) {
    const auto it = std::find_if(props.begin(), props.end(), [&](const PropertyValue& p) { return p.name == name; });
    return it == props.end() ? nullptr : &*it;
}

// The smaller of a configured uint64 limit and the profile's.
void narrow_limit(std::vector<PropertyValue>& extra, const char* name, std::uint64_t value) {
    if (PropertyValue* p = find(extra, name)) {
        if (const auto* old = std::get_if<std::uint64_t>(&p->value)) value = std::min(*old, value);
        p->value = value;
        return;
    }
    extra.push_back({name, value});
}

void force_on(std::vector<PropertyValue>& extra, const char* name) {
    if (PropertyValue* p = find(extra, name)) p->value = true;
    else extra.push_back({name, true});
}

void append_paths(std::vector<PropertyValue>& extra, const char* name, std::vector<std::string> paths) {
    if (paths.empty()) return;
    if (PropertyValue* p = find(extra, name)) {
        if (auto* old = std::get_if<std::vector<std::string>>(&p->value)) {
            old->insert(old->end(), paths.begin(), paths.end());
            return;
        }
    }
    extra.push_back({name, std::move(paths)});
}

// Whether the inheritance leaves `path` writable as far as the unit's mount namespace goes
// (the file system permissions still apply on top).
bool inherited_writable(const InheritedFilesystem& in, std::string_view path) {
    for (const auto& rw : in.read_write_paths)
        if (path_under(path, strip_prefixes(rw))) return true;
    const int sys = system_rank(in.protect_system);
    if (sys >= 3) return false;  // strict: all but the agent's own ReadWritePaths=
    static constexpr std::array<std::string_view, 3> kSystemDirs = {"/usr", "/boot", "/efi"};
    if (sys >= 1)
        for (const auto d : kSystemDirs)
            if (path_under(path, d)) return false;
    if (sys >= 2 && path_under(path, "/etc")) return false;
    static constexpr std::array<std::string_view, 3> kHomeDirs = {"/home", "/root", "/run/user"};
    if (home_rank(in.protect_home) >= 1)
        for (const auto d : kHomeDirs)
            if (path_under(path, d)) return false;
    for (const auto& ro : in.read_only_paths)
        if (path_under(path, strip_prefixes(ro))) return false;
    for (const auto& hidden : in.inaccessible_paths)
        if (path_under(path, strip_prefixes(hidden))) return false;
    return true;
}

std::vector<std::string> read_strv(sd_bus_message* m) {
    std::vector<std::string> out;
    if (sd_bus_message_enter_container(m, 'v', "as") < 0) return out;
    char** items = nullptr;
    if (sd_bus_message_read_strv(m, &items) >= 0 && items) {
        for (char** i = items; *i; ++i) {
            out.emplace_back(*i);
            std::free(*i);
        }
        std::free(static_cast<void*>(items));
    }
    (void)sd_bus_message_exit_container(m);
    return out;
}

}  // namespace

bool path_under(std::string_view path, std::string_view dir) {
    path = strip_prefixes(path);
    dir = strip_prefixes(dir);
    while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
    if (dir == "/") return !path.empty() && path.front() == '/';
    return path.starts_with(dir) && (path.size() == dir.size() || path[dir.size()] == '/');
}

InheritedFilesystem inherited_filesystem(sd_bus_message* agent, const std::vector<PropertyValue>& configured) {
    InheritedFilesystem in;
    if (agent && sd_bus_message_rewind(agent, 1) >= 0 && sd_bus_message_enter_container(agent, 'a', "{sv}") >= 0) {
        int r = 0;
        while ((r = sd_bus_message_enter_container(agent, 'e', "sv")) > 0) {
            const char* name = nullptr;
            if (sd_bus_message_read(agent, "s", &name) < 0) break;
            const std::string_view n(name);
            if (n == "ProtectSystem" || n == "ProtectHome") {
                const char* v = nullptr;
                if (sd_bus_message_read(agent, "v", "s", &v) < 0) break;
                (n == "ProtectSystem" ? in.protect_system : in.protect_home) = v ? v : "no";
            } else if (n == "ReadOnlyPaths") {
                in.read_only_paths = read_strv(agent);
            } else if (n == "InaccessiblePaths") {
                in.inaccessible_paths = read_strv(agent);
            } else if (n == "ReadWritePaths") {
                in.read_write_paths = read_strv(agent);
            } else if (sd_bus_message_skip(agent, "v") < 0) {
                break;
            }
            if (sd_bus_message_exit_container(agent) < 0) break;
        }
        // The message is read again by the request builder, which rewinds it first.
    }
    for (const auto& p : configured) {
        const auto* v = std::get_if<std::string>(&p.value);
        if (!v) continue;
        if (p.name == "ProtectSystem" && system_rank(*v) > system_rank(in.protect_system)) in.protect_system = *v;
        if (p.name == "ProtectHome" && home_rank(*v) > home_rank(in.protect_home)) in.protect_home = *v;
    }
    return in;
}

void apply_profile(const SandboxProfile& profile, const std::string& cwd_path,
                   const InheritedFilesystem& inherited, std::vector<PropertyValue>& extra,
                   std::vector<std::string>& dropped) {
    if (profile.memory_max) {
        narrow_limit(extra, "MemoryMax", *profile.memory_max);
        // The limit is on memory, not on memory+swap: without this a hog pages out past it.
        narrow_limit(extra, "MemorySwapMax", 0);
    }
    if (profile.tasks_max) narrow_limit(extra, "TasksMax", *profile.tasks_max);
    // 100% is one CPU: 1 s of CPU time per second (CPUQuotaPerSecUSec).
    if (profile.cpu_quota_percent)
        narrow_limit(extra, "CPUQuotaPerSecUSec", std::uint64_t{*profile.cpu_quota_percent} * 10'000);
    // A network namespace of its own with only a loopback device (systemd.exec(5)).
    if (profile.network == SandboxProfile::Network::None) force_on(extra, "PrivateNetwork");
    if (profile.filesystem == SandboxProfile::Filesystem::ReadOnly) {
        if (PropertyValue* p = find(extra, "ProtectSystem")) p->value = std::string("strict");
        else extra.push_back({"ProtectSystem", std::string("strict")});
        force_on(extra, "PrivateTmp");  // /tmp and /var/tmp of its own
        // ProtectSystem=strict leaves /dev writable, and /dev/shm is the host's: a private
        // tmpfs there, as the direct backend's mount namespace has.
        append_paths(extra, "TemporaryFileSystem", {"/dev/shm"});
        // Not race-free, and need not be: systemd resolves these paths when the unit starts,
        // after our resolve. The agent may swap a directory or a symlink on the way in
        // between, and so make writable another path than the one it named; but a bind
        // mount of a path only lifts the read-only mount, never the file permissions, so it
        // can only make writable what the agent could already write outside the session.
        // (What the inheritance keeps read-only is filtered by path here, and systemd
        // mounts ReadOnlyPaths=/InaccessiblePaths= by the same path rules.)
        std::vector<std::string> paths;
        if (profile.writable_cwd && !cwd_path.empty()) paths.push_back(cwd_path);
        for (const auto& w : profile.writable) paths.push_back(w);
        std::vector<std::string> kept, bound;
        for (auto& p : paths) {
            if (!inherited_writable(inherited, p)) {
                dropped.push_back(p);
                continue;
            }
            // "-": a listed path that does not exist is skipped rather than failing the
            // start; there is nothing to make writable there.
            std::string entry = p == cwd_path ? p : "-" + p;
            // Under /tmp, /var/tmp or /dev/shm the private mounts above hide the path itself:
            // ReadWritePaths= would fail the start (226/NAMESPACE, seen with systemd 252), so
            // it is bound in from outside instead (BindPaths=, writable, same place).
            const bool hidden_by_private =
                path_under(p, "/tmp") || path_under(p, "/var/tmp") || path_under(p, "/dev/shm");
            (hidden_by_private ? bound : kept).push_back(std::move(entry));
        }
        append_paths(extra, "ReadWritePaths", std::move(kept));
        append_paths(extra, "BindPaths", std::move(bound));
    }
    // Hidden whatever the rest says; systemd drops a ReadWritePaths= entry beneath one.
    std::vector<std::string> hidden;
    for (const auto& h : profile.hidden) hidden.push_back("-" + h);
    append_paths(extra, "InaccessiblePaths", std::move(hidden));
}

}  // namespace ptyvisor::backends::systemd
