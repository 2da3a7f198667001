#include "backends/systemd/session_units.h"

#include <systemd/sd-bus.h>

#include <algorithm>
#include <cstdlib>

namespace ptyvisor::backends::systemd {
namespace {

bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

bool is_valid_unit_name(std::string_view name) {
    if (name.empty() || name.size() > 255) return false;
    for (const char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                        c == ':' || c == '_' || c == '.' || c == '-' || c == '@' || c == '\\';
        if (!ok) return false;
    }
    const auto dot = name.rfind('.');
    return dot != std::string_view::npos && dot > 0 && dot + 1 < name.size();
}

bool is_session_unit_name(std::string_view name, std::string_view prefix) {
    constexpr std::string_view suffix = ".service";
    if (name.size() != prefix.size() + 1 + 32 + suffix.size()) return false;
    if (name.substr(0, prefix.size()) != prefix || name[prefix.size()] != '-') return false;
    const auto hex = name.substr(prefix.size() + 1, 32);
    for (const char c : hex)
        if (!is_lower_hex(c)) return false;
    return name.substr(prefix.size() + 33) == suffix;
}

std::string session_unit_glob(std::string_view prefix) {
    std::string glob(prefix);
    glob += '-';
    for (int i = 0; i < 32; ++i) glob += "[0-9a-f]";
    glob += ".service";
    return glob;
}

std::string unit_object_path(std::string_view unit) {
    char* path = nullptr;
    const std::string name(unit);
    if (sd_bus_path_encode("/org/freedesktop/systemd1/unit", name.c_str(), &path) < 0 || !path)
        return {};
    std::string out(path);
    std::free(path);
    return out;
}

bool cgroup_in_session(std::string_view cgroup, std::string_view prefix) {
    size_t i = 0;
    while (i <= cgroup.size()) {
        const size_t j = std::min(cgroup.find('/', i), cgroup.size());
        const auto part = cgroup.substr(i, j - i);
        if (part == kSessionSlice || is_session_unit_name(part, prefix)) return true;
        i = j + 1;
    }
    return false;
}

std::string_view cgroup_leaf(std::string_view cgroup) {
    const auto slash = cgroup.rfind('/');
    return slash == std::string_view::npos ? cgroup : cgroup.substr(slash + 1);
}

}  // namespace ptyvisor::backends::systemd
