// `ptyvisor web`: serves the supervision console (docs/console-api.md) on 127.0.0.1 or a Unix
// socket, as the person who runs it; never as root. The server is src/web/server.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ptyvisor::cli {

struct WebOptions {
    std::optional<std::string> socket;   // the daemon's
    std::optional<std::string> listen;   // HOST:PORT (default 127.0.0.1:8650)
    std::optional<std::string> unix_path;
    std::optional<std::string> token_file;
    std::string version;  // ptyvisor's
};

// The exit status: 2 for a refusal (root, bad options, a bad token file), 1 when it cannot
// listen, 0 after SIGINT or SIGTERM.
int web_command(const WebOptions& options);

}  // namespace ptyvisor::cli
