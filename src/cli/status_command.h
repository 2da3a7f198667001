// `ptyvisor status`: asks the daemon for its STATUS report and prints it, as JSON with
// --json or as a table otherwise. Exit status 0, or 255 with the reason on stderr.
#pragma once

#include <optional>
#include <string>

#include "protocol/payloads.h"

namespace ptyvisor::cli {

struct StatusOptions {
    std::optional<std::string> socket;  // --socket
    bool json = false;                  // --json: print the report verbatim
};

int status_command(const StatusOptions& options);

// The readable form of a STATUS report (docs/protocol.md 5.7): backend, truncated (when
// set) and version, a table of sessions (unit, pid, peer pid, start time in UTC, bytes
// in/out, argv0) and the admission counters, refusals by code as "rejected.busy".
std::string format_status(const protocol::StatusReply& report);

}  // namespace ptyvisor::cli
