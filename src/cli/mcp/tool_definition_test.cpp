// The tool table: tools/list as it is pinned in testdata/tools_list.json, and the invariants
// that tie each entry's pieces together.
#include "cli/mcp/tool_definition.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace ptyvisor::cli::mcp {
namespace {

using nlohmann::json;

// tools/list is what a model reads, and what clients may cache and validate against: a change
// to it must be deliberate. After one, regenerate the file from `ptyvisor mcp`'s tools/list
// reply (its result.tools, with sorted keys and an indent of 2) and review the diff.
TEST(McpToolTable, ToolsListIsPinned) {
    std::ifstream file(PTYVISOR_MCP_TESTDATA "/tools_list.json");
    ASSERT_TRUE(file) << "cannot open " PTYVISOR_MCP_TESTDATA "/tools_list.json";
    std::stringstream text;
    text << file.rdbuf();
    const json pinned = json::parse(text.str());
    // The compact text is what goes on the wire, byte for byte.
    EXPECT_EQ(tool_definitions().dump(), pinned.dump());
}

TEST(McpToolTable, EachEntryDescribesItselfUnderItsOwnName) {
    std::set<std::string_view> names;
    std::set<std::size_t> indexes;
    for (const auto& tool : tool_table()) {
        EXPECT_EQ(tool.describe().at("name"), tool.name);
        EXPECT_TRUE(names.insert(tool.name).second) << tool.name << " is listed twice";
        EXPECT_TRUE(indexes.insert(tool.args_index).second) << tool.name << " shares its arguments' type";
        EXPECT_NE(tool.parse, nullptr);
        EXPECT_NE(tool.request, nullptr);
        EXPECT_NE(tool.result, nullptr);
        EXPECT_EQ(find_tool(tool.name), &tool);
    }
    EXPECT_EQ(indexes.size(), std::variant_size_v<ToolArgs>);
    EXPECT_EQ(find_tool("terminal_nothing"), nullptr);
}

TEST(McpToolTable, ParsedArgumentsLeadBackToTheirTool) {
    const std::string id = "0123456789abcdef0123456789abcdef";
    const std::map<std::string_view, json> calls = {
        {"terminal_start", {{"command", "true"}}},
        {"terminal_write", {{"id", id}, {"text", "x"}}},
        {"terminal_read", {{"id", id}}},
        {"terminal_screen", {{"id", id}}},
        {"terminal_wait", {{"id", id}}},
        {"terminal_list", json::object()},
        {"terminal_kill", {{"id", id}}},
        {"terminal_resize", {{"id", id}, {"cols", 80}, {"rows", 24}}},
        {"terminal_exec", {{"id", id}, {"command", "true"}}},
    };
    for (const auto& tool : tool_table()) {
        ASSERT_TRUE(calls.contains(tool.name)) << tool.name << " has no call in this test";
        ToolArgs args;
        std::string why;
        ASSERT_TRUE(tool.parse(calls.at(tool.name), args, why)) << tool.name << ": " << why;
        EXPECT_EQ(args.index(), tool.args_index) << tool.name;
        EXPECT_EQ(&tool_for(args), &tool);
    }
}

}  // namespace
}  // namespace ptyvisor::cli::mcp
