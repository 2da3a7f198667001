// ToolDefinition: everything about one MCP tool in one entry: its name, what tools/list says
// of it (description, input and output schemas), the check of its arguments, and how it runs
// against ptyvisord (the request it queues and the result it makes of the replies).
//
// tool_table() lists every tool, in the order tools/list shows them. The entries live with
// their family: tools_session.cpp (terminal_start, terminal_list, terminal_kill),
// tools_io.cpp (terminal_write, terminal_read, terminal_wait), tools_screen.cpp
// (terminal_screen, terminal_resize) and tools_exec.cpp (terminal_exec).
//
// Invariants: `describe()`'s "name" is `name`; `parse` leaves `out` holding the alternative of
// index `args_index` whenever it succeeds; `request`, `result` and the hooks are called only
// for a call whose args hold that alternative.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "cli/mcp/mcp_session.h"
#include "cli/mcp/tool_call.h"
#include "cli/mcp/tools.h"

namespace ptyvisor::cli::mcp {

struct ToolDefinition {
    std::string_view name;
    std::size_t args_index;  // of this tool's arguments in ToolArgs
    // The tools/list entry: {name, title, description, inputSchema, outputSchema}.
    nlohmann::json (*describe)();
    // The arguments (an object) into `out`. False with `why`.
    bool (*parse)(const nlohmann::json& arguments, ToolArgs& out, std::string& why);
    // Queues the request on `call.connection` (and may move `call.deadline`). False with `why`.
    bool (*request)(ToolCall& call, std::string& why);
    // The result, once the connection has finished or done_early(), without an ERROR or a
    // protocol violation.
    ToolResult (*result)(ToolCall& call);
    // Optional. The result when the daemon refused (call.said.error); default: its text.
    ToolResult (*refused)(const ToolCall& call) = nullptr;
    // Optional. Sees each event the daemon sends, before it is recorded.
    void (*on_event)(ToolCall& call, const client::Event& event) = nullptr;
    // Optional. Whether the call has what it came for before the daemon closes the connection.
    bool (*done_early)(const ToolCall& call) = nullptr;
    // Optional. Once the connection has finished without an ERROR or a protocol violation: true
    // when it has queued the call's next request on a new connection (call.connection
    // replaced, call.said cleared), false when the call is complete. False with `why` set: the
    // call fails with it.
    bool (*next)(ToolCall& call, std::string& why) = nullptr;
};

// Every tool, in tools/list order.
std::span<const ToolDefinition> tool_table();
// The tool named `name`, or nullptr.
const ToolDefinition* find_tool(std::string_view name);
// The tool whose arguments `args` holds.
const ToolDefinition& tool_for(const ToolArgs& args);

// The index of `Args` in ToolArgs, for ToolDefinition::args_index.
template <typename Args, typename Variant = ToolArgs>
struct ArgsIndex;
template <typename Args, typename... Alternatives>
struct ArgsIndex<Args, std::variant<Alternatives...>> {
    static constexpr std::size_t value = [] {
        std::size_t i = 0;
        bool found = false;
        ((found = found || std::is_same_v<Args, Alternatives>, i += found ? 0 : 1), ...);
        return i;
    }();
    static_assert(value < sizeof...(Alternatives), "not an alternative of ToolArgs");
};
template <typename Args>
inline constexpr std::size_t kArgsIndex = ArgsIndex<Args>::value;

// A ToolDefinition::parse from a parser of the tool's own arguments.
template <typename Args, bool (*Parse)(const nlohmann::json&, Args&, std::string&)>
bool parse_as(const nlohmann::json& arguments, ToolArgs& out, std::string& why) {
    return Parse(arguments, out.emplace<Args>(), why);
}

// The tools, defined in their family's file.
extern const ToolDefinition kTerminalStart;
extern const ToolDefinition kTerminalWrite;
extern const ToolDefinition kTerminalRead;
extern const ToolDefinition kTerminalScreen;
extern const ToolDefinition kTerminalWait;
extern const ToolDefinition kTerminalList;
extern const ToolDefinition kTerminalKill;
extern const ToolDefinition kTerminalResize;
extern const ToolDefinition kTerminalExec;

}  // namespace ptyvisor::cli::mcp
