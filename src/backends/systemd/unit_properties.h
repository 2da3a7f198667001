// Building the StartTransientUnit request for one session.
//
// Everything here is pure or reads only the file system: no bus traffic. The daemon calls
// validate_properties() when it loads its configuration, so that a bad property is reported
// at start-up and never at the first session.
#pragma once

#include <systemd/sd-bus.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "backends/systemd/sd_ptr.h"
#include "common/process.h"

namespace ptyvisor::backends::systemd {

// One unit property with its D-Bus type: b, t, i, s or as.
struct PropertyValue {
    std::string name;  // the D-Bus name, e.g. "MemoryMax", "CPUQuotaPerSecUSec"
    std::variant<bool, std::uint64_t, std::int32_t, std::string, std::vector<std::string>> value;
    bool operator==(const PropertyValue&) const = default;
};

// Maps configuration properties (unit-file spelling: MemoryMax=512M, CPUQuota=50%,
// RuntimeMaxSec=30, NoNewPrivileges=yes, ...) to their D-Bus names and types. Unknown names
// and bad values fail with a message that names the property.
bool translate_properties(const std::map<std::string, std::string>& properties,
                          std::vector<PropertyValue>& out, std::string& why);

// Whether every entry is a supported property with a valid value; for configuration loading.
bool validate_properties(const std::map<std::string, std::string>& properties, std::string& why);

// The names validate_properties() accepts, for documentation and error messages.
std::vector<std::string> supported_properties();

// systemd expands $VAR and ${VAR} in ExecStart arguments sent over D-Bus; "$$" is a literal $.
std::string escape_exec_argument(std::string_view arg);

// Resolves argv[0] as execvp would: a name with a slash is taken as is (relative to
// `cwd_path`), otherwise each PATH entry from `env` (or the default path) is tried. The result
// is an absolute path to a regular file that `uid`/`gid` may execute.
bool resolve_executable(const std::string& name, const std::vector<std::string>& env,
                        const std::string& cwd_path, uid_t uid, gid_t gid,
                        const std::vector<gid_t>& groups, std::string& out, std::string& why);

// systemd takes WorkingDirectory= as a path. Derives it from the verified directory fd and
// checks that the path still names the same directory (st_dev/st_ino), else fails with
// "working directory changed".
bool working_directory_path(int dir_fd, std::uint64_t dev, std::uint64_t ino, std::string& out,
                            std::string& why);

// Everything a session's transient service needs.
struct TransientService {
    std::string unit;
    std::string description;
    std::string slice;
    std::string user;
    std::string group;
    std::string working_directory;
    std::string exec_path;            // absolute
    std::vector<std::string> argv;    // unescaped; escaped when appended
    std::vector<std::string> env;
    int tty_fd = -1;                  // appended as type 'h' (the message holds a dup)
    std::string tty_path;
    std::uint64_t timeout_stop_usec = 5'000'000;
    std::vector<PropertyValue> extra; // from translate_properties
    // The agent's resource limits (SessionSpec::limits), as LimitX= and LimitXSoft=, but for
    // a limit that `extra` sets itself.
    std::optional<ResourceLimits> limits;
    // The agent's unit and its Service properties (a GetAll reply, a{sv}), or empty/nullptr:
    // the session gets the agent's sandbox (agent_sandbox_properties()) and, where the agent
    // has a private /tmp, network or IPC, JoinsNamespaceOf= it, to share them.
    std::string agent_unit;
    sd_bus_message* agent_properties = nullptr;
};

// The sandbox settings copied from the agent's unit, as systemd 252 reads and accepts them.
const std::vector<std::string_view>& agent_sandbox_properties();

// A ready Manager.StartTransientUnit(name, "fail", properties, []) call.
MessagePtr build_start_transient_unit(sd_bus* bus, const TransientService& service,
                                      std::string& why);

}  // namespace ptyvisor::backends::systemd
