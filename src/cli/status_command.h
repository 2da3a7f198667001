// `ptyvisor status`: asks the daemon for its STATUS report and prints it, as JSON with
// --json or as a table otherwise. Exit status 0, or 255 with the reason on stderr.
#pragma once

#include <optional>
#include <string>

namespace ptyvisor::cli {

struct StatusOptions {
    std::optional<std::string> socket;  // --socket
    bool json = false;                  // --json: print the report verbatim
};

int status_command(const StatusOptions& options);

// The readable form of a STATUS report (docs/protocol.md 5.7): top-level scalars
// (version, backend, ...), a table of sessions (unit, pid, peer pid, start time in UTC,
// bytes in/out, argv0) and the admission counters, nested ones as "rejected.busy".
// Missing members print as "-"; unknown ones are ignored.
// Throws std::invalid_argument when `json` is not a JSON object.
std::string format_status(const std::string& json);

}  // namespace ptyvisor::cli
