// `ptyvisor mcp`: an MCP server on stdin/stdout (newline-delimited JSON-RPC 2.0) whose tools
// drive ptyvisord's sessions as this account's client (daemon_runner.h). One poll loop over
// stdin, stdout and the daemon connections of the calls in flight; it ends when stdin closes
// and the calls in flight have been answered, or when stdout is gone.
#pragma once

#include <optional>
#include <string>

namespace ptyvisor::cli::mcp {

struct McpOptions {
    std::optional<std::string> socket;
    std::string version;  // ptyvisor's, for serverInfo
};

int mcp_command(const McpOptions& options);

}  // namespace ptyvisor::cli::mcp
