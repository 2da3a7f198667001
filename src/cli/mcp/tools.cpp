#include "cli/mcp/tools.h"

#include <array>
#include <limits>

#include "cli/options.h"
#include "cli/send_keys.h"
#include "protocol/screen_payloads.h"

namespace ptyvisor::cli::mcp {
namespace {

using nlohmann::json;

// --- schemas ---------------------------------------------------------------------------------

json id_property() {
    return {{"type", "string"},
            {"pattern", "^[0-9a-f]{32}$"},
            {"description", "The session's id, as terminal_start or terminal_list returned it."}};
}

json exit_property() {
    return {{"type", {"object", "null"}},
            {"description",
             "null while the session runs; once it has exited: {status: \"exited\", code} or "
             "{status: \"signaled\", signal}, and the reason it ended."}};
}

json state_property() { return {{"type", "string"}, {"enum", {"starting", "running", "exited"}}}; }

json object_schema(json properties, json required) {
    return {{"type", "object"},
            {"properties", std::move(properties)},
            {"required", std::move(required)},
            {"additionalProperties", false}};
}

// Output schemas list what is always there and allow more, so that a newer server's extra
// members do not break a client that validates.
json output_schema(json properties, json required) {
    return {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}};
}

json size_properties(json properties) {
    properties["cols"] = {{"type", "integer"}, {"minimum", 1}, {"maximum", 65535}, {"description", "Columns."}};
    properties["rows"] = {{"type", "integer"}, {"minimum", 1}, {"maximum", 65535}, {"description", "Rows."}};
    return properties;
}

json start_tool() {
    json input = object_schema(
        size_properties({
            {"command",
             {{"type", "string"},
              {"description",
               "A shell command line, run as /bin/sh -c COMMAND: pipes, redirections, && and "
               "variables work as in a terminal. Give this or argv."}}},
            {"argv",
             {{"type", "array"},
              {"items", {{"type", "string"}}},
              {"minItems", 1},
              {"description", "The program and its arguments, run without a shell. Give this or command."}}},
            {"cwd", {{"type", "string"}, {"description", "Working directory (default: the MCP server's)."}}},
            {"env",
             {{"type", "object"},
              {"additionalProperties", {{"type", "string"}}},
              {"description",
               "Variables to set, over the MCP server's own environment. TERM defaults to "
               "xterm-256color."}}},
        }),
        json::array());
    input["properties"]["cols"]["description"] = "Terminal width (default 80).";
    input["properties"]["rows"]["description"] = "Terminal height (default 24).";
    return {{"name", "terminal_start"},
            {"title", "Start a command on a new terminal"},
            {"description",
             "Start a command on its own pseudo-terminal, in the background, and return its session "
             "id at once. Use it for anything interactive or long-running: dev servers, REPLs, "
             "editors, test watchers, builds you want to follow. The session keeps running after "
             "this call (and after this MCP server exits) until it ends or terminal_kill ends it. "
             "Then use terminal_wait to wait for a line of output or the exit, terminal_read to "
             "read what it printed, terminal_write to type into it."},
            {"inputSchema", input},
            {"outputSchema",
             output_schema({{"id", id_property()}, {"argv", {{"type", "array"}, {"items", {{"type", "string"}}}}}},
                           {"id"})}};
}

json write_tool() {
    return {
        {"name", "terminal_write"},
        {"title", "Type into a terminal"},
        {"description",
         "Type text and/or keys into a session's terminal, as a person at the keyboard would. "
         "`text` is sent as it is (no newline is added: add the key Enter to submit a line); "
         "`keys` are named keys sent after the text, in order: Enter, Tab, Escape, Space, "
         "BSpace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, Insert, F1..F12, "
         "C-c (control-c: interrupt), C-d (end of input), C-z, M-x (alt-x), or a single "
         "character. Returns the number of bytes written. The output this causes comes later: "
         "follow with terminal_wait and terminal_read."},
        {"inputSchema",
         object_schema({{"id", id_property()},
                        {"text", {{"type", "string"}, {"description", "Text to type, sent literally."}}},
                        {"keys",
                         {{"type", "array"},
                          {"items", {{"type", "string"}}},
                          {"description", "Key names to press after the text, e.g. [\"Enter\"] or [\"C-c\"]."}}}},
                       {"id"})},
        {"outputSchema", output_schema({{"id", id_property()}, {"bytes", {{"type", "integer"}}}}, {"id", "bytes"})}};
}

json read_tool() {
    return {{"name", "terminal_read"},
            {"title", "Read a terminal's output"},
            {"description",
             "Read what a session has printed, as text. By default it continues where the last "
             "terminal_read of this session stopped (the first read starts at the beginning), so "
             "calling it repeatedly returns each piece of output once. Escape sequences (colours, "
             "cursor movement) are removed unless strip_ansi is false. Returns text, offset (where "
             "this text begins in the session's output), next_offset (where to continue), more "
             "(true: more output is already there, read again now), dropped_bytes (output lost "
             "because the session's log is bounded and it was not read in time), and the session's "
             "state and exit status. For a full-screen program (vim, top), terminal_screen shows "
             "the screen better."},
            {"inputSchema",
             object_schema(
                 {{"id", id_property()},
                  {"offset",
                   {{"type", "integer"},
                    {"minimum", 0},
                    {"description", "Byte offset to read from (default: where the last read stopped, else 0)."}}},
                  {"max_bytes",
                   {{"type", "integer"},
                    {"minimum", 1},
                    {"maximum", kMaxReadBytes},
                    {"description", "Most bytes of output to read (default 16384, at most 65536)."}}},
                  {"strip_ansi", {{"type", "boolean"}, {"description", "Remove escape sequences (default true)."}}}},
                 {"id"})},
            {"outputSchema",
             output_schema({{"id", id_property()},
                            {"text", {{"type", "string"}}},
                            {"offset", {{"type", "integer"}}},
                            {"next_offset", {{"type", "integer"}}},
                            {"end", {{"type", "integer"}}},
                            {"more", {{"type", "boolean"}}},
                            {"dropped_bytes", {{"type", "integer"}}},
                            {"state", state_property()},
                            {"exit", exit_property()}},
                           {"id", "text", "offset", "next_offset", "end", "more", "dropped_bytes", "state"})}};
}

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

json wait_tool() {
    return {
        {"name", "terminal_wait"},
        {"title", "Wait for a terminal"},
        {"description",
         "Wait until a session exits, prints text matching a regular expression, or goes quiet "
         "(prints nothing for quiet_ms milliseconds: a sign it waits for input), or until "
         "timeout_ms passes. Use it instead of sleeping: after terminal_start, wait for the "
         "line that says a server is ready; after terminal_write, wait for the prompt or for "
         "quiet. `pattern` is an RE2 regular expression searched in the raw output (escape "
         "sequences included) from `from` (default: the start of the output; give the "
         "next_offset of your last terminal_read to match only newer output). Returns reason "
         "(\"exit\", \"text\", \"quiet\", \"timeout\", or \"exited\": the session ended first), "
         "offset (the output's end then), match_start/match_end for text, state and exit."},
        {"inputSchema",
         object_schema({{"id", id_property()},
                        {"for",
                         {{"type", "string"},
                          {"enum", {"exit", "text", "quiet"}},
                          {"description",
                           "What to wait for (default: text when pattern is given, quiet when "
                           "quiet_ms is, else exit)."}}},
                        {"pattern", {{"type", "string"}, {"description", "RE2 regular expression, for text."}}},
                        {"quiet_ms",
                         {{"type", "integer"}, {"minimum", 1}, {"maximum", kMaxWaitMs}, {"description", "For quiet."}}},
                        {"from",
                         {{"type", {"integer", "string"}},
                          {"description", "For text: \"start\" (default), \"tail\" (only new output) or an offset."}}},
                        {"timeout_ms",
                         {{"type", "integer"},
                          {"minimum", 1},
                          {"maximum", kMaxWaitMs},
                          {"description", "Give up after this long (default 30000, at most 600000)."}}}},
                       {"id"})},
        {"outputSchema", output_schema({{"reason", {{"type", "string"}}},
                                        {"matched", {{"type", "boolean"}}},
                                        {"offset", {{"type", "integer"}}},
                                        {"match_start", {{"type", "integer"}}},
                                        {"match_end", {{"type", "integer"}}},
                                        {"state", state_property()},
                                        {"exit", exit_property()}},
                                       {"reason", "matched", "offset", "state"})}};
}

json list_tool() {
    json session = output_schema({{"id", id_property()},
                                  {"argv", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                                  {"state", state_property()},
                                  {"exit", exit_property()},
                                  {"cwd", {{"type", "string"}}},
                                  {"offset", {{"type", "integer"}}},
                                  {"clients", {{"type", "integer"}}},
                                  {"created", {{"type", "integer"}}}},
                                 {"id", "argv", "state"});
    return {{"name", "terminal_list"},
            {"title", "List terminals"},
            {"description",
             "List the sessions: running ones, and those that exited in the last minutes (with their "
             "exit status). Each has its id, command (argv), state, exit, working directory, "
             "offset (bytes of output so far), attached clients and creation time (Unix seconds). "
             "Use it to find a session's id again or to check that nothing is left running."},
            {"inputSchema", object_schema(json::object(), json::array())},
            {"outputSchema", output_schema({{"sessions", {{"type", "array"}, {"items", session}}}}, {"sessions"})}};
}

json kill_tool() {
    return {
        {"name", "terminal_kill"},
        {"title", "End a terminal's command"},
        {"description",
         "End a session: without `signal`, stop it as closing its terminal would (hangup, then "
         "SIGKILL for what remains) and return once it has exited, with its exit status. With "
         "`signal` (a name such as \"INT\", \"TERM\", \"KILL\", or a number), send that signal to "
         "every process of the session and return at once. To interrupt the way a person "
         "would, terminal_write the key C-c instead."},
        {"inputSchema",
         object_schema({{"id", id_property()},
                        {"signal", {{"type", {"string", "integer"}}, {"description", "Signal name or number."}}}},
                       {"id"})},
        {"outputSchema", output_schema({{"id", id_property()}, {"state", state_property()}, {"exit", exit_property()}},
                                       {"id", "state"})}};
}

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

// --- argument validation ---------------------------------------------------------------------

bool only_members(const json& args, std::initializer_list<std::string_view> allowed, std::string& why) {
    for (const auto& [key, value] : args.items()) {
        bool known = false;
        for (const auto a : allowed) known = known || key == a;
        if (!known) {
            why = "unknown argument '" + key + "'";
            return false;
        }
    }
    return true;
}

const json* member(const json& args, const char* name) {
    const auto it = args.find(name);
    return it == args.end() || it->is_null() ? nullptr : &*it;
}

bool get_string(const json& args, const char* name, std::optional<std::string>& out, std::string& why) {
    const json* v = member(args, name);
    if (v == nullptr) return true;
    if (!v->is_string()) return why = std::string("'") + name + "' must be a string", false;
    out = v->get<std::string>();
    return true;
}

bool get_uint(const json& args, const char* name, std::uint64_t low, std::uint64_t high,
              std::optional<std::uint64_t>& out, std::string& why) {
    const json* v = member(args, name);
    if (v == nullptr) return true;
    const bool negative = v->is_number_integer() && !v->is_number_unsigned() && v->get<std::int64_t>() < 0;
    if (!v->is_number_integer() || negative || v->get<std::uint64_t>() < low || v->get<std::uint64_t>() > high)
        return why = std::string("'") + name + "' must be an integer from " + std::to_string(low) + " to " +
                     std::to_string(high),
               false;
    out = v->get<std::uint64_t>();
    return true;
}

bool get_bool(const json& args, const char* name, bool& out, std::string& why) {
    const json* v = member(args, name);
    if (v == nullptr) return true;
    if (!v->is_boolean()) return why = std::string("'") + name + "' must be true or false", false;
    out = v->get<bool>();
    return true;
}

bool get_string_array(const json& args, const char* name, std::optional<std::vector<std::string>>& out,
                      std::string& why) {
    const json* v = member(args, name);
    if (v == nullptr) return true;
    if (!v->is_array()) return why = std::string("'") + name + "' must be an array of strings", false;
    std::vector<std::string> items;
    for (const auto& item : *v) {
        if (!item.is_string()) return why = std::string("'") + name + "' must be an array of strings", false;
        items.push_back(item.get<std::string>());
    }
    out = std::move(items);
    return true;
}

bool get_id(const json& args, std::string& id, std::string& why) {
    std::optional<std::string> text;
    if (!get_string(args, "id", text, why)) return false;
    if (!text) return why = "'id' is required", false;
    if (!check_session_id(*text, why)) return why = "'id': " + why, false;
    id = *text;
    return true;
}

bool get_size(const json& args, bool required, protocol::WindowSize& size, std::string& why) {
    std::optional<std::uint64_t> cols, rows;
    if (!get_uint(args, "cols", 1, 65535, cols, why) || !get_uint(args, "rows", 1, 65535, rows, why)) return false;
    if (required && (!cols || !rows)) return why = "'cols' and 'rows' are required", false;
    if (cols) size.cols = static_cast<std::uint16_t>(*cols);
    if (rows) size.rows = static_cast<std::uint16_t>(*rows);
    return true;
}

bool parse_start(const json& args, StartArgs& out, std::string& why) {
    if (!only_members(args, {"command", "argv", "cwd", "env", "cols", "rows"}, why)) return false;
    std::optional<std::string> command;
    std::optional<std::vector<std::string>> argv;
    if (!get_string(args, "command", command, why) || !get_string_array(args, "argv", argv, why)) return false;
    if (command.has_value() == argv.has_value()) return why = "give exactly one of 'command' and 'argv'", false;
    if (command) {
        if (command->empty()) return why = "'command' is empty", false;
        out.argv = {"/bin/sh", "-c", *command};
    } else {
        if (argv->empty() || argv->front().empty()) return why = "'argv' needs a program name first", false;
        out.argv = *argv;
    }
    if (!get_string(args, "cwd", out.cwd, why)) return false;
    if (out.cwd && out.cwd->empty()) return why = "'cwd' is empty", false;
    if (const json* env = member(args, "env")) {
        if (!env->is_object()) return why = "'env' must be an object of NAME: VALUE strings", false;
        for (const auto& [name, value] : env->items()) {
            if (!value.is_string()) return why = "'env': the value of " + name + " must be a string", false;
            if (name.empty() || name.find('=') != std::string::npos)
                return why = "'env': '" + name + "' is not a variable name", false;
            out.env_settings.push_back(name + "=" + value.get<std::string>());
            if (name == "TERM") out.term = value.get<std::string>();
        }
    }
    return get_size(args, false, out.size, why);
}

bool parse_write(const json& args, WriteArgs& out, std::string& why) {
    if (!only_members(args, {"id", "text", "keys"}, why) || !get_id(args, out.id, why)) return false;
    std::optional<std::string> text;
    std::optional<std::vector<std::string>> keys;
    if (!get_string(args, "text", text, why) || !get_string_array(args, "keys", keys, why)) return false;
    if (text) out.bytes = *text;
    for (const auto& key : keys.value_or(std::vector<std::string>{})) {
        const auto bytes = key_bytes(key);
        if (!bytes) return why = "'keys': '" + key + "' is not a key name (Enter, Tab, Up, C-c, M-x, F1, ...)", false;
        out.bytes += *bytes;
    }
    if (out.bytes.empty()) return why = "nothing to write: give 'text' or 'keys'", false;
    if (out.bytes.size() > kMaxWriteBytes)
        return why = "too much to write at once: " + std::to_string(out.bytes.size()) + " bytes, at most " +
                     std::to_string(kMaxWriteBytes),
               false;
    return true;
}

bool parse_read(const json& args, ReadArgs& out, std::string& why) {
    if (!only_members(args, {"id", "offset", "max_bytes", "strip_ansi"}, why) || !get_id(args, out.id, why))
        return false;
    std::optional<std::uint64_t> max_bytes;
    if (!get_uint(args, "offset", 0, std::numeric_limits<std::int64_t>::max(), out.offset, why) ||
        !get_uint(args, "max_bytes", 1, kMaxReadBytes, max_bytes, why) ||
        !get_bool(args, "strip_ansi", out.strip_ansi, why))
        return false;
    out.max_bytes = max_bytes.value_or(kDefaultReadBytes);
    return true;
}

bool parse_position(const json& value, protocol::LogPosition& out, std::string& why) {
    if (value.is_string()) return parse_log_position(value.get<std::string>(), out, why);
    if (value.is_number_integer() && (value.is_number_unsigned() || value.get<std::int64_t>() >= 0)) {
        out = {protocol::LogPosition::Kind::Offset, value.get<std::uint64_t>()};
        return true;
    }
    why = "'from' must be \"start\", \"tail\" or an offset (an integer >= 0)";
    return false;
}

bool parse_wait(const json& args, WaitArgs& out, std::string& why) {
    using For = protocol::WaitRequest::For;
    auto& r = out.request;
    if (!only_members(args, {"id", "for", "pattern", "quiet_ms", "from", "timeout_ms"}, why) ||
        !get_id(args, r.id, why))
        return false;
    std::optional<std::string> what, pattern;
    std::optional<std::uint64_t> quiet_ms, timeout_ms;
    if (!get_string(args, "for", what, why) || !get_string(args, "pattern", pattern, why) ||
        !get_uint(args, "quiet_ms", 1, kMaxWaitMs, quiet_ms, why) ||
        !get_uint(args, "timeout_ms", 1, kMaxWaitMs, timeout_ms, why))
        return false;
    if (!what) what = pattern ? "text" : quiet_ms ? "quiet" : "exit";
    if (*what == "exit") {
        r.what = For::Exit;
    } else if (*what == "text") {
        r.what = For::Text;
        if (!pattern || pattern->empty()) return why = "waiting for text needs a non-empty 'pattern'", false;
        if (pattern->size() > protocol::kMaxPatternLength)
            return why = "'pattern' is longer than " + std::to_string(protocol::kMaxPatternLength) + " bytes", false;
        r.pattern = *pattern;
    } else if (*what == "quiet") {
        r.what = For::Quiet;
        if (!quiet_ms) return why = "waiting for quiet needs 'quiet_ms'", false;
        r.quiet_ms = *quiet_ms;
    } else {
        return why = "'for' must be \"exit\", \"text\" or \"quiet\"", false;
    }
    if (pattern && r.what != For::Text) return why = "'pattern' applies to waiting for text only", false;
    if (quiet_ms && r.what != For::Quiet) return why = "'quiet_ms' applies to waiting for quiet only", false;
    if (const json* from = member(args, "from")) {
        if (r.what != For::Text) return why = "'from' applies to waiting for text only", false;
        if (!parse_position(*from, r.from, why)) return why = "'from': " + why, false;
    }
    r.timeout_ms = timeout_ms.value_or(kDefaultWaitMs);
    return true;
}

bool parse_kill(const json& args, KillArgs& out, std::string& why) {
    if (!only_members(args, {"id", "signal"}, why) || !get_id(args, out.id, why)) return false;
    const json* signal = member(args, "signal");
    if (signal == nullptr) return true;
    if (signal->is_number_integer()) {
        std::optional<std::uint64_t> number;
        if (!get_uint(args, "signal", 1, 64, number, why)) return false;
        out.signal = static_cast<int>(*number);
        return true;
    }
    if (!signal->is_string()) return why = "'signal' must be a signal name or number", false;
    if (!parse_signal(signal->get<std::string>(), out.signal, why)) return why = "'signal': " + why, false;
    return true;
}

bool parse_resize(const json& args, ResizeArgs& out, std::string& why) {
    return only_members(args, {"id", "cols", "rows"}, why) && get_id(args, out.id, why) &&
           get_size(args, true, out.size, why);
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

}  // namespace

json tool_definitions() {
    return json::array(
        {start_tool(), write_tool(), read_tool(), screen_tool(), wait_tool(), list_tool(), kill_tool(), resize_tool()});
}

bool is_known_tool(std::string_view name) {
    static constexpr std::array kNames{"terminal_start", "terminal_write", "terminal_read", "terminal_screen",
                                       "terminal_wait",  "terminal_list",  "terminal_kill", "terminal_resize"};
    for (const std::string_view n : kNames)
        if (n == name) return true;
    return false;
}

bool parse_tool_arguments(std::string_view name, const json& arguments, ToolArgs& out, std::string& why) {
    if (!arguments.is_object()) return why = "the arguments must be an object", false;
    if (name == "terminal_start") return parse_start(arguments, out.emplace<StartArgs>(), why);
    if (name == "terminal_write") return parse_write(arguments, out.emplace<WriteArgs>(), why);
    if (name == "terminal_read") return parse_read(arguments, out.emplace<ReadArgs>(), why);
    if (name == "terminal_screen") return parse_screen(arguments, out.emplace<ScreenArgs>(), why);
    if (name == "terminal_wait") return parse_wait(arguments, out.emplace<WaitArgs>(), why);
    if (name == "terminal_list") return only_members(arguments, {}, why) && (out.emplace<ListArgs>(), true);
    if (name == "terminal_kill") return parse_kill(arguments, out.emplace<KillArgs>(), why);
    if (name == "terminal_resize") return parse_resize(arguments, out.emplace<ResizeArgs>(), why);
    why = "unknown tool '" + std::string(name) + "'";
    return false;
}

}  // namespace ptyvisor::cli::mcp
