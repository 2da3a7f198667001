// The MCP tools of `ptyvisor mcp` as the MCP session sees them: their definitions (name,
// description for a model, input and output JSON schemas) and the validation of a call's
// arguments into typed requests. Each tool is one ToolDefinition (tool_definition.h), its
// pieces side by side. Pure: no I/O, unit-tested (tools_test.cpp). A bad argument is false
// with `why`, a sentence that names the argument, for the model to correct its call.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/payloads.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::cli::mcp {

// terminal_read: the default and the most bytes of text one call returns, and the most bytes
// of the log one call condenses into that text (condensed_output.h).
inline constexpr std::uint64_t kDefaultReadBytes = 16 * 1024;
inline constexpr std::uint64_t kMaxReadBytes = 64 * 1024;
inline constexpr std::uint64_t kReadWindowBytes = 4 * 1024 * 1024;
// terminal_wait: the default and the longest timeout. MCP clients give up on a call after a
// minute or so by default, so the longest wait stays within what a client will sit through
// when configured for it.
inline constexpr std::uint64_t kDefaultWaitMs = 30'000;
inline constexpr std::uint64_t kMaxWaitMs = 10 * 60'000;
// terminal_exec: the default and the most bytes of output text one call returns.
inline constexpr std::uint64_t kDefaultExecOutputBytes = 16 * 1024;
inline constexpr std::uint64_t kMaxExecOutputBytes = 1024 * 1024;
// terminal_write: the most bytes one call sends (one SEND).
inline constexpr std::size_t kMaxWriteBytes = 64 * 1024;

struct StartArgs {
    std::vector<std::string> argv;          // `command` becomes /bin/sh -c COMMAND
    std::optional<std::string> cwd;         // default: the server's working directory
    std::vector<std::string> env_settings;  // NAME=VALUE, over the server's environment
    std::string term = "xterm-256color";    // env's TERM when given
    protocol::WindowSize size;
    bool shell_integration = false;  // argv is bash or zsh, made to report its commands
    std::optional<std::string> profile;  // a sandbox profile the daemon offers; default: its default
};
// terminal_exec: one EXEC (docs/protocol.md, 11.4), then READs of the command's output.
struct ExecArgs {
    std::string id;
    std::string command;  // one line
    std::uint64_t timeout_ms = kDefaultWaitMs;
    std::uint64_t max_output_bytes = kDefaultExecOutputBytes;  // of condensed text
};
struct WriteArgs {
    std::string id;
    std::string bytes;  // text, then the keys' bytes; 1..kMaxWriteBytes
};
struct ReadArgs {
    std::string id;
    std::optional<std::uint64_t> offset;  // default: where this server's last read stopped
    std::optional<std::uint64_t> to;      // a range to page through in order; > offset
    std::uint64_t max_bytes = kDefaultReadBytes;  // of text
    bool strip_ansi = true;
};
// terminal_screen: one SNAPSHOT (docs/protocol.md, section 10).
struct ScreenArgs {
    std::string id;
    std::uint32_t scrollback = 0;  // lines above the screen, 0..protocol::kMaxScrollbackLines
    bool attributes = false;       // colours and styles of the visible cells
};
struct WaitArgs {
    protocol::WaitRequest request;  // id, what, pattern/quiet_ms, from, timeout_ms
};
struct ListArgs {};
struct KillArgs {
    std::string id;
    int signal = 0;  // 0: end the session
};
struct ResizeArgs {
    std::string id;
    protocol::WindowSize size;
};

using ToolArgs =
    std::variant<StartArgs, WriteArgs, ReadArgs, ScreenArgs, WaitArgs, ListArgs, KillArgs, ResizeArgs, ExecArgs>;

// The tools as tools/list returns them: [{name, title, description, inputSchema, outputSchema}].
nlohmann::json tool_definitions();

// Whether `name` is one of our tools.
bool is_known_tool(std::string_view name);

// The arguments of a call of tool `name` (a known tool) into `out`. `arguments` must be an
// object; members not in the schema are refused (a misspelt option should not pass
// silently). False with `why`.
bool parse_tool_arguments(std::string_view name, const nlohmann::json& arguments, ToolArgs& out, std::string& why);

}  // namespace ptyvisor::cli::mcp
