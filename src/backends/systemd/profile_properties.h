// A SandboxProfile as transient-unit properties, merged so that it only ever narrows.
//
// A session's unit gets, in this order (systemd keeps the last value of a scalar property and
// appends list properties): the agent unit's copied sandbox, then `extra` ([session.properties]
// merged with the profile here), then the enforced sandbox (NoNewPrivileges=, the empty
// bounding set, RestrictSUIDSGID=; unit_properties.cpp), which no profile can reach.
//
// Invariants:
//  - apply_profile() never raises a limit nor turns a protection off: MemoryMax=, TasksMax=
//    and CPUQuota= become the smaller of the configured and the profile's value;
//    PrivateNetwork=, PrivateTmp= only ever become yes; ProtectSystem= only ever strict.
//  - ReadWritePaths= (the profile's `writable` and the working directory; BindPaths= for those
//    under the private /tmp, /var/tmp, /dev/shm) never reopens what
//    the agent's copied sandbox or [session.properties] made read-only: a path under such a
//    part is dropped (and reported), unless the agent unit itself has it writable.
#pragma once

#include <systemd/sd-bus.h>

#include <string>
#include <vector>

#include "backends/sandbox_profile.h"
#include "backends/systemd/unit_properties.h"

namespace ptyvisor::backends::systemd {

// What the file system already looks like to a session before its profile: the read-only
// parts of the agent's copied sandbox and of [session.properties].
struct InheritedFilesystem {
    std::string protect_system = "no";  // no, yes, full, strict: the strictest of both
    std::string protect_home = "no";    // no, yes, read-only, tmpfs: the strictest of both
    std::vector<std::string> read_only_paths;
    std::vector<std::string> inaccessible_paths;
    std::vector<std::string> read_write_paths;  // the agent unit's own
};

// Reads it from the agent unit's Service properties (a GetAll reply, a{sv}; nullptr: no agent
// unit) and the translated [session.properties].
InheritedFilesystem inherited_filesystem(sd_bus_message* agent_properties,
                                         const std::vector<PropertyValue>& configured);

// Merges `profile` into `extra` (the translated [session.properties]). `cwd_path` is the
// session's working directory (SessionSpec::cwd_path). Paths the profile asked to make
// writable that the inheritance keeps read-only are added to `dropped`.
void apply_profile(const SandboxProfile& profile, const std::string& cwd_path,
                   const InheritedFilesystem& inherited, std::vector<PropertyValue>& extra,
                   std::vector<std::string>& dropped);

// Whether `path` is `dir` or lies beneath it (both absolute and normalized; "-" and "+"
// prefixes of systemd's path lists are ignored).
bool path_under(std::string_view path, std::string_view dir);

}  // namespace ptyvisor::backends::systemd
