// Naming of session units and recognising processes that run inside one.
#pragma once

#include <string>
#include <string_view>

namespace ptyvisor::backends::systemd {

// The slice every session unit is placed in.
inline constexpr std::string_view kSessionSlice = "ptyvisor.slice";

// systemd unit names: [A-Za-z0-9:_.\-@], 1..255 characters, with a suffix.
bool is_valid_unit_name(std::string_view name);

// "<prefix>-<32 lowercase hex digits>.service", exactly as the server names sessions.
bool is_session_unit_name(std::string_view name, std::string_view prefix);

// The ListUnitsByPatterns glob matching is_session_unit_name() (fnmatch bracket classes).
std::string session_unit_glob(std::string_view prefix);

// "/org/freedesktop/systemd1/unit/<bus-escaped name>".
std::string unit_object_path(std::string_view unit);

// Whether `cgroup` lies inside ptyvisor.slice or inside a session unit of `prefix`.
bool cgroup_in_session(std::string_view cgroup, std::string_view prefix);

// The last component of a cgroup path ("/system.slice/a.service" -> "a.service").
std::string_view cgroup_leaf(std::string_view cgroup);

}  // namespace ptyvisor::backends::systemd
