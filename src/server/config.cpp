#include "server/config.h"

#include <toml++/toml.h>

#include <sstream>
#include <string_view>
#include <type_traits>
#include <utility>

namespace ptyvisor::server {
namespace {

std::string where(const toml::source_region& r) {
    std::ostringstream s;
    s << "line " << r.begin.line << ", column " << r.begin.column;
    return s.str();
}

class Reader {
public:
    Reader(const std::string& path, const toml::table& root) : path_(path), root_(root) {}

    // The first failure only: the rest often follow from it.
    bool failed = false;
    std::string why;

    void string(const toml::table& t, const char* key, std::string& out) {
        if (const auto* node = t.get(key)) {
            if (const auto v = node->value<std::string>()) out = *v;
            else fail(*node, std::string("'") + key + "' must be a string");
        }
    }

    void boolean(const toml::table& t, const char* key, bool& out) {
        if (const auto* node = t.get(key)) {
            if (node->is_boolean()) out = *node->value<bool>();
            else fail(*node, std::string("'") + key + "' must be true or false");
        }
    }

    void strings(const toml::table& t, const char* key, std::vector<std::string>& out) {
        const auto* node = t.get(key);
        if (!node) return;
        const auto* arr = node->as_array();
        if (!arr) return fail(*node, std::string("'") + key + "' must be an array of strings");
        out.clear();
        for (const auto& e : *arr) {
            if (const auto v = e.value<std::string>()) out.push_back(*v);
            else return fail(e, std::string("'") + key + "' must be an array of strings");
        }
    }

    template <class T>
    void count(const toml::table& t, const char* key, std::type_identity_t<T> lo, std::type_identity_t<T> hi,
               T& out) {
        const auto* node = t.get(key);
        if (!node) return;
        const auto v = node->value<std::int64_t>();
        if (!v || !node->is_integer()) return fail(*node, std::string("'") + key + "' must be an integer");
        if (std::cmp_less(*v, lo) || std::cmp_greater(*v, hi))
            return fail(*node, std::string("'") + key + "' must be between " + std::to_string(lo) +
                                   " and " + std::to_string(hi));
        out = static_cast<T>(*v);
    }

    void seconds(const toml::table& t, const char* key, std::chrono::duration<double>& out) {
        const auto* node = t.get(key);
        if (!node) return;
        const auto v = node->value<double>();
        if (!v || !(node->is_integer() || node->is_floating_point()))
            return fail(*node, std::string("'") + key + "' must be a number of seconds");
        if (!(*v > 0 && *v <= 3600))
            return fail(*node, std::string("'") + key + "' must be > 0 and <= 3600 seconds");
        out = std::chrono::duration<double>(*v);
    }

    void fail(const toml::node& node, const std::string& what) {
        if (failed) return;
        failed = true;
        why = path_ + ": " + where(node.source()) + ": " + what;
    }

    // Unknown keys are refused: a typo must not silently fall back to a default.
    void only(const toml::table& t, std::initializer_list<std::string_view> keys) {
        for (const auto& [k, v] : t) {
            bool known = false;
            for (auto key : keys) known = known || k.str() == key;
            if (!known) fail(v, "unknown key '" + std::string(k.str()) + "'");
        }
    }

    const toml::table& root() const { return root_; }

private:
    std::string path_;
    const toml::table& root_;
};

// 100 years, in seconds: "forever" is 0, and nothing larger can mean more than it does.
constexpr std::uint64_t kMaxRecordingRetention = 100ull * 366 * 24 * 3600;

const toml::table* subtable(Reader& r, const toml::table& t, const char* key) {
    const auto* node = t.get(key);
    if (!node) return nullptr;
    if (!node->is_table()) {
        r.fail(*node, std::string("'") + key + "' must be a table");
        return nullptr;
    }
    return node->as_table();
}

bool is_unit_prefix_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

// 1-31 characters of [A-Za-z0-9_.-], not starting with '.' or '-'.
bool is_unit_prefix(std::string_view p) {
    if (p.empty() || p.size() > 31 || p.front() == '.' || p.front() == '-') return false;
    for (const char c : p)
        if (!is_unit_prefix_char(c)) return false;
    return true;
}

// "NAME.service", NAME non-empty and of the characters unit names (escaped) are made of.
bool is_service_unit_name(std::string_view u) {
    constexpr std::string_view kSuffix = ".service";
    if (u.size() <= kSuffix.size() || !u.ends_with(kSuffix)) return false;
    for (const char c : u.substr(0, u.size() - kSuffix.size()))
        if (!is_unit_prefix_char(c) && c != ':' && c != '\\' && c != '@') return false;
    return true;
}

// toml++ (the packaged, compiled library) reports by exception; this is the one call that
// can throw it, and it becomes `why` here.
bool parse_toml_file(const std::string& path, toml::table& out, std::string& why) {
    try {
        out = toml::parse_file(path);
        return true;
    } catch (const toml::parse_error& e) {
        why = path + ": ";
        if (e.source().begin) why += where(e.source()) + ": ";
        why += e.description();
        return false;
    }
}

bool is_profile_name(std::string_view name) {
    if (name.empty() || name.size() > 64) return false;
    for (const char c : name)
        if (!is_unit_prefix_char(c)) return false;
    return true;
}

bool is_absolute_clean_path(std::string_view p) {
    if (p.empty() || p.front() != '/' || p.size() > 4095) return false;
    // No "." or ".." component and no empty one: the path names what it says.
    std::size_t i = 1;
    while (i <= p.size()) {
        const std::size_t j = std::min(p.find('/', i), p.size());
        const std::string_view part = p.substr(i, j - i);
        if ((part.empty() && j != p.size()) || part == "." || part == "..") return false;
        i = j + 1;
    }
    return true;
}

void read_profile(Reader& r, const std::string& name, const toml::table& t, backends::SandboxProfile& p) {
    p.name = name;
    r.only(t, {"memory_max", "tasks_max", "cpu_quota", "runtime_max", "idle_timeout", "network", "filesystem",
               "writable", "hidden"});
    if (const auto* node = t.get("memory_max")) {
        std::optional<std::uint64_t> bytes;
        if (node->is_integer() && *node->value<std::int64_t>() > 0) bytes = *node->value<std::int64_t>();
        else if (const auto text = node->value<std::string>(); text && node->is_string()) bytes = parse_byte_size(*text);
        if (!bytes || *bytes < (1u << 20))
            r.fail(*node, "'memory_max' must be a size of at least 1M: bytes, or a string such as \"512M\"");
        else p.memory_max = bytes;
    }
    if (t.get("tasks_max")) {
        std::uint64_t tasks = 0;
        r.count(t, "tasks_max", 1, 4194304, tasks);
        if (tasks) p.tasks_max = tasks;
    }
    if (const auto* node = t.get("cpu_quota")) {
        std::optional<std::uint32_t> percent;
        if (const auto text = node->value<std::string>(); text && node->is_string()) percent = parse_cpu_quota(*text);
        if (!percent) r.fail(*node, "'cpu_quota' must be a percentage of one CPU, such as \"50%\" or \"200%\"");
        else p.cpu_quota_percent = percent;
    }
    for (const char* key : {"runtime_max", "idle_timeout"}) {
        if (!t.get(key)) continue;
        std::uint64_t seconds = 0;
        r.count(t, key, 1, 366ull * 24 * 3600, seconds);
        if (!seconds) continue;
        (std::string_view(key) == "runtime_max" ? p.runtime_max : p.idle_timeout) = std::chrono::seconds(seconds);
    }
    if (const auto* node = t.get("network")) {
        const auto v = node->value<std::string>();
        if (v && *v == "none") p.network = backends::SandboxProfile::Network::None;
        else if (v && *v == "host") p.network = backends::SandboxProfile::Network::Host;
        else r.fail(*node, "'network' must be \"none\" (loopback only) or \"host\"");
    }
    if (const auto* node = t.get("filesystem")) {
        const auto v = node->value<std::string>();
        if (v && *v == "read-only") p.filesystem = backends::SandboxProfile::Filesystem::ReadOnly;
        else if (v && *v == "host") p.filesystem = backends::SandboxProfile::Filesystem::Host;
        else r.fail(*node, "'filesystem' must be \"read-only\" or \"host\"");
    }
    std::vector<std::string> writable;
    r.strings(t, "writable", writable);
    for (auto& w : writable) {
        if (w == "cwd") p.writable_cwd = true;
        else if (is_absolute_clean_path(w)) p.writable.push_back(std::move(w));
        else r.fail(*t.get("writable"), "'writable' entries must be \"cwd\" or absolute paths without . or ..");
    }
    r.strings(t, "hidden", p.hidden);
    for (const auto& h : p.hidden)
        if (!is_absolute_clean_path(h) || h == "/")
            r.fail(*t.get("hidden"), "'hidden' entries must be absolute paths without . or .. (not /)");
    if (!p.writable.empty() || p.writable_cwd) {
        if (p.filesystem != backends::SandboxProfile::Filesystem::ReadOnly)
            r.fail(*t.get("writable"), "'writable' needs filesystem = \"read-only\" (else everything is)");
    }
}

}  // namespace

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
    if (text.empty() || text.size() > 24) return std::nullopt;
    std::uint64_t value = 0;
    std::size_t i = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
        if (value > (UINT64_MAX - 9) / 10) return std::nullopt;
        value = value * 10 + static_cast<std::uint64_t>(text[i] - '0');
    }
    if (i == 0) return std::nullopt;
    const std::string_view suffix = text.substr(i);
    int shift = 0;
    if (suffix.empty()) shift = 0;
    else if (suffix == "K") shift = 10;
    else if (suffix == "M") shift = 20;
    else if (suffix == "G") shift = 30;
    else if (suffix == "T") shift = 40;
    else return std::nullopt;
    if (shift && value > (UINT64_MAX >> shift)) return std::nullopt;
    return value << shift;
}

std::optional<std::uint32_t> parse_cpu_quota(std::string_view text) {
    if (text.size() < 2 || text.back() != '%') return std::nullopt;
    std::uint32_t value = 0;
    for (const char c : text.substr(0, text.size() - 1)) {
        if (c < '0' || c > '9' || value > 100000) return std::nullopt;
        value = value * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (value < 1 || value > 100000) return std::nullopt;
    return value;
}

bool load_config_file(const std::string& path, Config& c, std::string& why) {
    toml::table root;
    if (!parse_toml_file(path, root, why)) return false;
    Reader r(path, root);
    r.only(root, {"user", "socket", "backend", "allow_units", "unit_prefix", "state_directory",
                  "observer_group", "supervisor_group", "limits", "timeouts", "recording", "session", "screen",
                  "profiles", "allowed_profiles", "default_profile", "policy", "audit"});
    r.string(root, "user", c.user);
    r.string(root, "socket", c.socket);
    r.string(root, "backend", c.backend);
    r.strings(root, "allow_units", c.allow_units);
    r.string(root, "unit_prefix", c.unit_prefix);
    r.string(root, "state_directory", c.state_directory);
    r.string(root, "observer_group", c.observer_group);
    r.string(root, "supervisor_group", c.supervisor_group);
    if (const auto* t = subtable(r, root, "limits")) {
        r.only(*t, {"max_sessions", "max_unauthenticated", "max_unauthenticated_per_peer",
                    "admissions_per_minute", "socket_buffer_bytes", "held_input_bytes",
                    "output_buffer_bytes", "output_log_bytes"});
        r.count(*t, "max_sessions", 1, 100000, c.limits.max_sessions);
        r.count(*t, "max_unauthenticated", 1, 100000, c.limits.max_unauthenticated);
        r.count(*t, "max_unauthenticated_per_peer", 1, 100000, c.limits.max_unauthenticated_per_peer);
        r.count(*t, "admissions_per_minute", 1, 1000000, c.limits.admissions_per_minute);
        r.count(*t, "socket_buffer_bytes", 4096, 16 << 20, c.limits.socket_buffer_bytes);
        r.count(*t, "held_input_bytes", 4096, 16 << 20, c.limits.held_input_bytes);
        r.count(*t, "output_buffer_bytes", 65536, 16 << 20, c.limits.output_buffer_bytes);
        r.count(*t, "output_log_bytes", 65536, 1 << 30, c.limits.output_log_bytes);
    }
    if (const auto* t = subtable(r, root, "timeouts")) {
        r.only(*t, {"handshake", "operation", "drain", "cleanup", "retention", "reattach"});
        r.seconds(*t, "handshake", c.timeouts.handshake);
        r.seconds(*t, "operation", c.timeouts.operation);
        r.seconds(*t, "drain", c.timeouts.drain);
        r.seconds(*t, "cleanup", c.timeouts.cleanup);
        r.seconds(*t, "retention", c.timeouts.retention);
        r.seconds(*t, "reattach", c.timeouts.reattach);
    }
    if (const auto* t = subtable(r, root, "recording")) {
        r.only(*t, {"directory", "max_bytes", "max_total_bytes", "keep_free_percent", "retention"});
        r.string(*t, "directory", c.recording.directory);
        r.count(*t, "max_bytes", 4096, std::uint64_t{1} << 40, c.recording.max_bytes);
        r.count(*t, "max_total_bytes", 4096, std::uint64_t{1} << 50, c.recording.max_total_bytes);
        r.count(*t, "keep_free_percent", 0, 90, c.recording.keep_free_percent);
        auto retention = static_cast<std::uint64_t>(c.recording.retention.count());
        r.count(*t, "retention", 0, kMaxRecordingRetention, retention);
        c.recording.retention = std::chrono::seconds(retention);
    }
    if (const auto* t = subtable(r, root, "screen")) {
        r.only(*t, {"enabled", "user", "reply_timeout"});
        r.boolean(*t, "enabled", c.screen.enabled);
        r.string(*t, "user", c.screen.user);
        r.seconds(*t, "reply_timeout", c.screen.reply_timeout);
    }
    if (const auto* t = subtable(r, root, "session")) {
        r.only(*t, {"properties"});
        if (const auto* p = subtable(r, *t, "properties")) {
            for (const auto& [k, v] : *p) {
                if (const auto s = v.value<std::string>(); s && v.is_string()) {
                    c.session_properties[std::string(k.str())] = *s;
                } else if (v.is_integer()) {
                    c.session_properties[std::string(k.str())] = std::to_string(*v.value<std::int64_t>());
                } else if (v.is_boolean()) {
                    c.session_properties[std::string(k.str())] = *v.value<bool>() ? "yes" : "no";
                } else {
                    r.fail(v, "session property '" + std::string(k.str()) +
                                  "' must be a string, integer or boolean");
                }
            }
        }
    }
    if (const auto* t = subtable(r, root, "audit")) {
        r.only(*t, {"sink"});
        r.string(*t, "sink", c.audit_sink);
    }
    r.strings(root, "allowed_profiles", c.allowed_profiles);
    r.string(root, "default_profile", c.default_profile);
    if (const auto* t = subtable(r, root, "profiles")) {
        for (const auto& [k, v] : *t) {
            const std::string name(k.str());
            if (!is_profile_name(name)) {
                r.fail(v, "profile name '" + name + "' must be 1-64 characters of [A-Za-z0-9_.-]");
                continue;
            }
            if (!v.is_table()) {
                r.fail(v, "'profiles." + name + "' must be a table");
                continue;
            }
            read_profile(r, name, *v.as_table(), c.profiles[name]);
        }
    }
    if (const auto* t = subtable(r, root, "policy"); t && !r.failed) {
        if (std::string policy_why; !parse_policy(*t, path, c.policy, policy_why)) {
            why = policy_why;
            return false;
        }
    }
    if (r.failed) why = r.why;
    return !r.failed;
}

namespace {

bool refuse(std::string& why, std::string message) {
    why = std::move(message);
    return false;
}

}  // namespace

bool validate(const Config& c, std::string& why) {
    if (c.user.empty()) return refuse(why, "no account configured: set 'user' in the file or pass --user");
    if (c.backend != "auto" && c.backend != "systemd" && c.backend != "direct")
        return refuse(why, "backend must be auto, systemd or direct, not '" + c.backend + "'");
    if (c.socket.empty() || c.socket.front() != '/') return refuse(why, "socket must be an absolute path");
    if (c.socket.size() >= 108) return refuse(why, "socket path is too long for a Unix socket");
    if (c.screen.enabled && c.screen.user == "root")
        return refuse(why, "[screen] user must be an unprivileged account (or empty: a uid of the worker's own)");
    if (c.state_directory.empty() || c.state_directory.front() != '/')
        return refuse(why, "state_directory must be an absolute path");
    if (!c.recording.directory.empty() && c.recording.directory.front() != '/')
        return refuse(why, "[recording] directory must be an absolute path (or empty: no recording)");
    if (c.limits.output_log_bytes < c.limits.output_buffer_bytes + 65536)
        return refuse(why, "output_log_bytes must exceed output_buffer_bytes by 64 KiB at least: a bound session's "
                           "client lags behind by at most output_buffer_bytes, and the log must still hold what it "
                           "has not read");
    if (!is_unit_prefix(c.unit_prefix))
        return refuse(why, "unit_prefix must be 1-31 characters of [A-Za-z0-9_.-], not starting with '.' or '-'");
    for (const auto& u : c.allow_units)
        if (!is_service_unit_name(u)) return refuse(why, "allow_units entry '" + u + "' is not a service unit name");
    if (c.limits.max_unauthenticated_per_peer > c.limits.max_unauthenticated)
        return refuse(why, "max_unauthenticated_per_peer must not exceed max_unauthenticated");
    if (c.audit_sink != "auto" && c.audit_sink != "journal" && c.audit_sink != "file")
        return refuse(why, "[audit] sink must be auto, journal or file, not '" + c.audit_sink + "'");
    // "ask" needs a person to answer (approvals), which this version does not offer yet: a
    // policy that says it is refused rather than read as allow or deny.
    if (c.policy.default_decision == Verdict::Ask)
        return refuse(why, "[policy] default = \"ask\": approvals are not offered by this version of ptyvisord");
    for (const auto& rule : c.policy.rules)
        if (rule.decision == Verdict::Ask)
            return refuse(why, rule.where + ": decision = \"ask\": approvals are not offered by this version of "
                                            "ptyvisord");
    if (!c.default_profile.empty() && !c.profiles.contains(c.default_profile))
        return refuse(why, "default_profile '" + c.default_profile + "' is not defined in [profiles]");
    for (const auto& name : c.allowed_profiles)
        if (!c.profiles.contains(name))
            return refuse(why, "allowed_profiles names '" + name + "', which is not defined in [profiles]");
    return true;
}

}  // namespace ptyvisor::server
