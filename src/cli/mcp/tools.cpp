#include "cli/mcp/tools.h"

#include <array>
#include <stdexcept>

#include "cli/mcp/tool_definition.h"

namespace ptyvisor::cli::mcp {

using nlohmann::json;

std::span<const ToolDefinition> tool_table() {
    static const std::array kTable{kTerminalStart, kTerminalExec, kTerminalWrite, kTerminalRead, kTerminalScreen,
                                   kTerminalWait,  kTerminalList, kTerminalKill,  kTerminalResize};
    return kTable;
}

const ToolDefinition* find_tool(std::string_view name) {
    for (const auto& tool : tool_table())
        if (tool.name == name) return &tool;
    return nullptr;
}

const ToolDefinition& tool_for(const ToolArgs& args) {
    for (const auto& tool : tool_table())
        if (tool.args_index == args.index()) return tool;
    throw std::logic_error("no tool takes these arguments");
}

json tool_definitions() {
    json tools = json::array();
    for (const auto& tool : tool_table()) tools.push_back(tool.describe());
    return tools;
}

bool is_known_tool(std::string_view name) { return find_tool(name) != nullptr; }

bool parse_tool_arguments(std::string_view name, const json& arguments, ToolArgs& out, std::string& why) {
    if (!arguments.is_object()) return why = "the arguments must be an object", false;
    if (const auto* tool = find_tool(name)) return tool->parse(arguments, out, why);
    why = "unknown tool '" + std::string(name) + "'";
    return false;
}

}  // namespace ptyvisor::cli::mcp
