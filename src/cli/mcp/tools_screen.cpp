// The screen tools: terminal_screen and terminal_resize. Each tool's definition, argument
// check, request and result sit together, then its ToolDefinition.
#include "cli/mcp/screen_view.h"
#include "cli/mcp/tool_arguments.h"
#include "cli/mcp/tool_definition.h"
#include "cli/mcp/tool_replies.h"
#include "cli/mcp/tool_schema.h"
#include "protocol/screen_payloads.h"

namespace ptyvisor::cli::mcp {
namespace {

using nlohmann::json;
using namespace schema;
using namespace arguments;

// --- terminal_screen -------------------------------------------------------------------------

json screen_tool() {
    json cursor = output_schema(
        {{"row", {{"type", "integer"}}}, {"col", {{"type", "integer"}}}, {"visible", {{"type", "boolean"}}}},
        {"row", "col", "visible"});
    json run = output_schema(
        {{"row", {{"type", "integer"}}}, {"col", {{"type", "integer"}}}, {"width", {{"type", "integer"}}}},
        {"row", "col", "width"});
    return {
        {"name", "terminal_screen"},
        {"title", "Show a terminal's screen"},
        {"description",
         "Show what a session's terminal screen looks like now, as a terminal emulator "
         "following all its output (cursor movement, redraws, the alternate screen) sees it, "
         "like `tmux capture-pane -p`. Use it for full-screen programs (vim, top, less, "
         "menus, progress bars) where the output stream is hard to read, or to see what is "
         "on screen now; use terminal_read for ordinary line-by-line output. The text shows "
         "the size, the cursor (0-based row and column), the title, whether the alternate "
         "screen (a full-screen program) is showing, then each row prefixed by its number "
         "(0 is the top row; negative numbers are scrollback lines above it). `scrollback` "
         "adds that many of the lines that scrolled off the top (at most 10000; the server "
         "keeps 1000). `attributes` adds the colours and styles of the cells."},
        {"inputSchema",
         object_schema({{"id", id_property()},
                        {"scrollback",
                         {{"type", "integer"},
                          {"minimum", 0},
                          {"maximum", protocol::kMaxScrollbackLines},
                          {"description", "Lines above the screen to include, newest last (default 0)."}}},
                        {"attributes",
                         {{"type", "boolean"},
                          {"description", "Include the colour and style runs of the visible cells (default false)."}}}},
                       {"id"})},
        {"outputSchema",
         output_schema({{"id", id_property()},
                        {"cols", {{"type", "integer"}}},
                        {"rows", {{"type", "integer"}}},
                        {"cursor", cursor},
                        {"alternate", {{"type", "boolean"}}},
                        {"title", {{"type", "string"}}},
                        {"offset", {{"type", "integer"}}},
                        {"lines", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                        {"scrollback", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                        {"attributes", {{"type", "array"}, {"items", run}}}},
                       {"id", "cols", "rows", "cursor", "alternate", "title", "offset", "lines", "scrollback"})}};
}

bool parse_screen(const json& args, ScreenArgs& out, std::string& why) {
    if (!only_members(args, {"id", "scrollback", "attributes"}, why) || !get_id(args, out.id, why)) return false;
    std::optional<std::uint64_t> scrollback;
    if (!get_uint(args, "scrollback", 0, protocol::kMaxScrollbackLines, scrollback, why) ||
        !get_bool(args, "attributes", out.attributes, why))
        return false;
    out.scrollback = static_cast<std::uint32_t>(scrollback.value_or(0));
    return true;
}

bool request_screen(ToolCall& call, std::string& why) {
    const auto& screen = std::get<ScreenArgs>(call.args);
    // The request `ptyvisor screen` sends; the daemon answers within its worker's 5 s.
    return call.connection.queue_snapshot({screen.id, screen.scrollback, screen.attributes}, why);
}

ToolResult screen_refused(const ToolCall& call) {
    const auto& error = *call.said.error;
    switch (error.code) {
        case protocol::ErrorCode::UnsupportedVersion:
            // A daemon older than protocol version 3.
            return ToolResult::error(
                "this ptyvisord does not offer screen snapshots (it predates protocol "
                "version 3): use terminal_read instead; " +
                error_text(error));
        case protocol::ErrorCode::Internal:
            // The screen worker is restarting or slow; a restarted one rebuilds every screen.
            return ToolResult::error(
                "the screen is not available right now (ptyvisord's screen worker may be "
                "restarting): call terminal_screen again in a moment, or use "
                "terminal_read; " +
                error_text(error));
        default:
            return ToolResult::error(error_text(error));
    }
}

ToolResult screen_result(ToolCall& call) {
    const auto& s = call.said;
    if (!s.screen) return ToolResult::error("connection to ptyvisord lost before the screen arrived");
    return ToolResult::ok(screen_view_json(s.screen->screen), screen_view_text(s.screen->screen));
}

// --- terminal_resize -------------------------------------------------------------------------

json resize_tool() {
    json properties = size_properties({{"id", id_property()}});
    return {{"name", "terminal_resize"},
            {"title", "Resize a terminal"},
            {"description",
             "Change a session's terminal size (the program gets SIGWINCH and redraws). Fails when "
             "a person has the session attached (ptyvisor attach): the size is theirs then."},
            {"inputSchema", object_schema(properties, {"id", "cols", "rows"})},
            {"outputSchema",
             output_schema({{"id", id_property()}, {"cols", {{"type", "integer"}}}, {"rows", {{"type", "integer"}}}},
                           {"id", "cols", "rows"})}};
}

bool parse_resize(const json& args, ResizeArgs& out, std::string& why) {
    return only_members(args, {"id", "cols", "rows"}, why) && get_id(args, out.id, why) &&
           get_size(args, true, out.size, why);
}

bool request_resize(ToolCall& call, std::string& why) {
    // Only a controller may resize: attach as one for as long as it takes, then detach.
    const auto& z = std::get<ResizeArgs>(call.args);
    return call.connection.attach(
        {z.id, {protocol::LogPosition::Kind::Tail, 0}, /*observe=*/false, /*takeover=*/false}, why);
}

void resize_on_event(ToolCall& call, const client::Event& event) {
    if (!std::holds_alternative<client::Attached>(event)) return;
    call.connection.queue_resize(std::get<ResizeArgs>(call.args).size);
    call.connection.queue_detach();
}

// Done at DETACHED: the size is set.
bool resize_done_early(const ToolCall& call) { return call.said.detached.has_value(); }

ToolResult resize_refused(const ToolCall& call) {
    const auto& error = *call.said.error;
    if (error.code == protocol::ErrorCode::Busy)
        return ToolResult::error(
            "cannot resize: a client is attached to this session as its controller (someone runs "
            "`ptyvisor attach` on it), and the terminal's size is that client's; " +
            error_text(error));
    return ToolResult::error(error_text(error));
}

ToolResult resize_result(ToolCall& call) {
    const auto& s = call.said;
    const auto& z = std::get<ResizeArgs>(call.args);
    if (s.detached) return ToolResult::ok({{"id", z.id}, {"cols", z.size.cols}, {"rows", z.size.rows}});
    if (s.exit || (s.attached && s.attached->state == protocol::State::Exited))
        return ToolResult::error("the session has exited: there is no terminal to resize");
    return ToolResult::error("connection to ptyvisord lost");
}

}  // namespace

constinit const ToolDefinition kTerminalScreen{
    .name = "terminal_screen",
    .args_index = kArgsIndex<ScreenArgs>,
    .describe = screen_tool,
    .parse = parse_as<ScreenArgs, parse_screen>,
    .request = request_screen,
    .result = screen_result,
    .refused = screen_refused,
};

constinit const ToolDefinition kTerminalResize{
    .name = "terminal_resize",
    .args_index = kArgsIndex<ResizeArgs>,
    .describe = resize_tool,
    .parse = parse_as<ResizeArgs, parse_resize>,
    .request = request_resize,
    .result = resize_result,
    .refused = resize_refused,
    .on_event = resize_on_event,
    .done_early = resize_done_early,
};

}  // namespace ptyvisor::cli::mcp
