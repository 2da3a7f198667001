// The session tools: terminal_start, terminal_list and terminal_kill. Each tool's
// definition, argument check, request and result sit together, then its ToolDefinition.
#include <chrono>

#include "cli/mcp/tool_arguments.h"
#include "cli/mcp/tool_definition.h"
#include "cli/mcp/tool_replies.h"
#include "cli/mcp/tool_schema.h"
#include "cli/options.h"

namespace ptyvisor::cli::mcp {
namespace {

using nlohmann::json;
using namespace schema;
using namespace arguments;

// KILL without a signal answers once the session has ended: within the daemon's cleanup
// bound (15 s by default).
constexpr std::chrono::milliseconds kKillTimeout{45'000};

// --- terminal_start --------------------------------------------------------------------------

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
            {"shell_integration",
             {{"type", "boolean"},
              {"description",
               "Start an interactive bash or zsh that reports its prompts and commands, so that "
               "terminal_exec can run commands in it. argv must then be [\"bash\"] or [\"zsh\"] "
               "(default [\"bash\"]), not command."}}},
            {"profile",
             {{"type", "string"},
              {"description",
               "A sandbox profile the administrator offers (limits on memory, processes, CPU, run "
               "time, network, file system). Default: the administrator's default profile. A "
               "profile that is not offered is refused, and the error lists those that are."}}},
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
             "read what it printed, terminal_write to type into it. For a shell to run one command "
             "after another in (with terminal_exec), start {shell_integration: true}."},
            {"inputSchema", input},
            {"outputSchema",
             output_schema({{"id", id_property()}, {"argv", {{"type", "array"}, {"items", {{"type", "string"}}}}}},
                           {"id"})}};
}

bool parse_start(const json& args, StartArgs& out, std::string& why) {
    if (!only_members(args, {"command", "argv", "cwd", "env", "cols", "rows", "shell_integration", "profile"}, why))
        return false;
    std::optional<std::string> command;
    std::optional<std::vector<std::string>> argv;
    if (!get_string(args, "command", command, why) || !get_string_array(args, "argv", argv, why) ||
        !get_bool(args, "shell_integration", out.shell_integration, why))
        return false;
    if (out.shell_integration) {
        if (command) return why = "shell_integration starts a shell: give argv [\"bash\"] or [\"zsh\"], not 'command'", false;
        if (!argv) argv = std::vector<std::string>{"bash"};
    }
    if (command.has_value() == argv.has_value()) return why = "give exactly one of 'command' and 'argv'", false;
    if (command) {
        if (command->empty()) return why = "'command' is empty", false;
        out.argv = {"/bin/sh", "-c", *command};
    } else {
        if (argv->empty() || argv->front().empty()) return why = "'argv' needs a program name first", false;
        out.argv = *argv;
    }
    if (!get_string(args, "cwd", out.cwd, why) || !get_string(args, "profile", out.profile, why)) return false;
    if (out.cwd && out.cwd->empty()) return why = "'cwd' is empty", false;
    if (out.profile && out.profile->empty()) return why = "'profile' is empty", false;
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

bool request_start(ToolCall& call, std::string& why) {
    const auto& a = std::get<StartArgs>(call.args);
    client::StartOptions options;
    options.argv = a.argv;
    bool queued = build_environment(current_environment(), false, a.env_settings, options.env, why);
    options.term = a.term;
    options.size = a.size;
    if (a.cwd) options.cwd = *a.cwd;
    options.detach = true;
    options.shell_integration = a.shell_integration;
    options.profile = a.profile.value_or("");
    return queued && call.connection.start(options, why);
}

// A detached START is done at STARTED: we then let go of the session.
bool start_done_early(const ToolCall& call) { return call.said.started.has_value(); }

ToolResult start_result(ToolCall& call) {
    const auto& s = call.said;
    if (!s.started) return ToolResult::error("ptyvisord closed the connection before the session started");
    return ToolResult::ok({{"id", s.started->id}, {"argv", std::get<StartArgs>(call.args).argv}});
}

// --- terminal_list ---------------------------------------------------------------------------

json list_tool() {
    json session = output_schema({{"id", id_property()},
                                  {"argv", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                                  {"state", state_property()},
                                  {"exit", exit_property()},
                                  {"cwd", {{"type", "string"}}},
                                  {"offset", {{"type", "integer"}}},
                                  {"clients", {{"type", "integer"}}},
                                  {"created", {{"type", "integer"}}},
                                  {"held_by_person", {{"type", "boolean"}}}},
                                 {"id", "argv", "state"});
    return {{"name", "terminal_list"},
            {"title", "List terminals"},
            {"description",
             "List the sessions: running ones, and those that exited in the last minutes (with their "
             "exit status). Each has its id, command (argv), state, exit, working directory, "
             "offset (bytes of output so far), attached clients and creation time (Unix seconds), "
             "and held_by_person: true while a person who supervises you has taken the terminal "
             "(your writes to it are then refused until they hand it back). "
             "Use it to find a session's id again or to check that nothing is left running."},
            {"inputSchema", object_schema(json::object(), json::array())},
            {"outputSchema", output_schema({{"sessions", {{"type", "array"}, {"items", session}}}}, {"sessions"})}};
}

bool parse_list(const json& args, ToolArgs& out, std::string& why) {
    return only_members(args, {}, why) && (out.emplace<ListArgs>(), true);
}

bool request_list(ToolCall& call, std::string&) {
    call.connection.queue_list();
    return true;
}

ToolResult list_result(ToolCall& call) {
    const auto& s = call.said;
    if (!s.sessions) return ToolResult::error("connection to ptyvisord lost");
    json sessions = json::array();
    for (const auto& i : *s.sessions)
        sessions.push_back({{"id", i.id},
                            {"argv", i.argv},
                            {"state", state_name(i.state)},
                            {"exit", exit_json(i.exit)},
                            {"cwd", i.cwd},
                            {"offset", i.offset},
                            {"clients", i.clients},
                            {"created", i.created},
                            {"detached", i.detached},
                            {"held_by_person", i.held}});
    return ToolResult::ok({{"sessions", std::move(sessions)}});
}

// --- terminal_kill ---------------------------------------------------------------------------

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

bool request_kill(ToolCall& call, std::string& why) {
    const auto& k = std::get<KillArgs>(call.args);
    if (k.signal == 0) call.deadline = std::chrono::steady_clock::now() + kKillTimeout;
    return call.connection.queue_kill({k.id, k.signal}, why);
}

ToolResult kill_result(ToolCall& call) {
    const auto& s = call.said;
    if (!s.killed) return ToolResult::error("connection to ptyvisord lost");
    return ToolResult::ok(
        {{"id", s.killed->id}, {"state", state_name(s.killed->state)}, {"exit", exit_json(s.killed->exit)}});
}

}  // namespace

constinit const ToolDefinition kTerminalStart{
    .name = "terminal_start",
    .args_index = kArgsIndex<StartArgs>,
    .describe = start_tool,
    .parse = parse_as<StartArgs, parse_start>,
    .request = request_start,
    .result = start_result,
    .done_early = start_done_early,
};

constinit const ToolDefinition kTerminalList{
    .name = "terminal_list",
    .args_index = kArgsIndex<ListArgs>,
    .describe = list_tool,
    .parse = parse_list,
    .request = request_list,
    .result = list_result,
};

constinit const ToolDefinition kTerminalKill{
    .name = "terminal_kill",
    .args_index = kArgsIndex<KillArgs>,
    .describe = kill_tool,
    .parse = parse_as<KillArgs, parse_kill>,
    .request = request_kill,
    .result = kill_result,
};

}  // namespace ptyvisor::cli::mcp
