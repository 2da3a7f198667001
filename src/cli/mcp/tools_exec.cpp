// terminal_exec: one command line run in a session's shell (EXEC, docs/protocol.md 11.4), then
// its output read with READ, page after page, through a Condenser into at most
// max_output_bytes of text: its head and its tail when it is longer.
#include <chrono>

#include "cli/mcp/tool_arguments.h"
#include "cli/mcp/tool_definition.h"
#include "cli/mcp/tool_replies.h"
#include "cli/mcp/tool_schema.h"
#include "protocol/command_payloads.h"

namespace ptyvisor::cli::mcp {
namespace {

using nlohmann::json;
using namespace schema;
using namespace arguments;
using Outcome = protocol::ExecReply::Outcome;

// EXEC answers within its timeout, and with Ctrl-C's grace; this much more before we call the
// daemon hung. Each READ of the output is answered at once.
constexpr std::chrono::milliseconds kExecMargin{15'000};
constexpr std::chrono::milliseconds kReadTimeout{20'000};

json exec_tool() {
    return {
        {"name", "terminal_exec"},
        {"title", "Run a command in a terminal's shell"},
        {"description",
         "Run one command line in a session's shell, as if typed at its prompt, wait for it to end "
         "and return its exit code and output. The session must be a bash or zsh started by "
         "terminal_start with shell_integration true; its state (working directory, variables, "
         "activated environments) carries over from one command to the next. Prefer this to "
         "terminal_write + terminal_wait + terminal_read for any command that ends by itself "
         "(builds, tests, git, ls): one call, the exact exit code, only that command's output. "
         "Use terminal_write for programs you converse with (REPLs, editors, prompts). "
         "If the command stops to ask for input, state is \"waiting_for_input\" (it still runs): "
         "answer with terminal_write, then terminal_wait for \"command\" with after = seq - 1. "
         "At timeout_ms, state is \"timeout\" and the command goes on. The output is the "
         "terminal's lines, escape sequences removed; when longer than max_output_bytes you get "
         "its first and last lines around one line that says what was left out, and offsets "
         "(start, end) lets terminal_read (offset, to) page through all of it."},
        {"inputSchema",
         object_schema({{"id", id_property()},
                        {"command",
                         {{"type", "string"},
                          {"description", "One command line for the shell (no newline): pipes, &&, cd work."}}},
                        {"timeout_ms",
                         {{"type", "integer"},
                          {"minimum", 1},
                          {"maximum", kMaxWaitMs},
                          {"description", "Give up waiting after this long (default 30000, at most 600000)."}}},
                        {"max_output_bytes",
                         {{"type", "integer"},
                          {"minimum", 1},
                          {"maximum", kMaxExecOutputBytes},
                          {"description", "Most bytes of output text to return (default 16384)."}}}},
                       {"id", "command"})},
        {"outputSchema",
         output_schema({{"exit_code", {{"type", {"integer", "null"}}}},
                        {"state", {{"type", "string"}, {"enum", {"exited", "timeout", "waiting_for_input"}}}},
                        {"interrupted", {{"type", "boolean"}}},
                        {"session_ended", {{"type", "boolean"}}},
                        {"output", {{"type", "string"}}},
                        {"truncated", {{"type", "boolean"}}},
                        {"seq", {{"type", {"integer", "null"}}}},
                        {"offsets",
                         {{"type", "object"},
                          {"properties", {{"start", {{"type", "integer"}}}, {"end", {{"type", "integer"}}}}}}}},
                       {"exit_code", "state", "output", "truncated", "seq"})}};
}

bool parse_exec(const json& args, ExecArgs& out, std::string& why) {
    if (!only_members(args, {"id", "command", "timeout_ms", "max_output_bytes"}, why) || !get_id(args, out.id, why))
        return false;
    std::optional<std::string> command;
    std::optional<std::uint64_t> timeout_ms, max_output;
    if (!get_string(args, "command", command, why) || !get_uint(args, "timeout_ms", 1, kMaxWaitMs, timeout_ms, why) ||
        !get_uint(args, "max_output_bytes", 1, kMaxExecOutputBytes, max_output, why))
        return false;
    if (!command) return why = "'command' is required", false;
    if (!protocol::is_exec_command(*command, why)) return why = "'command': " + why, false;
    out.command = *command;
    out.timeout_ms = timeout_ms.value_or(kDefaultWaitMs);
    out.max_output_bytes = max_output.value_or(kDefaultExecOutputBytes);
    return true;
}

bool request_exec(ToolCall& call, std::string& why) {
    const auto& e = std::get<ExecArgs>(call.args);
    call.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(e.timeout_ms) +
                    std::chrono::milliseconds(protocol::kExecInterruptGraceMs) + kExecMargin;
    return call.connection.queue_exec({e.id, e.command, e.timeout_ms, false}, why);
}

// The output's range: the record's, or up to the log's end at the reply while it runs.
std::uint64_t output_end(const protocol::ExecReply& reply) {
    const auto& r = *reply.command;
    return r.output_end.value_or(std::max(reply.offset, r.output_start));
}

// After EXECUTED, and after each page of the output: READ the next page, if any.
bool exec_next(ToolCall& call, std::string& why) {
    const auto& e = std::get<ExecArgs>(call.args);
    std::uint64_t from = 0;
    if (!call.executed) {
        if (!call.said.executed) return false;  // the daemon closed without a reply: result says so
        call.executed = call.said.executed;
        if (!call.executed->command) return false;
        from = call.executed->command->output_start;
        call.read_to = output_end(*call.executed);
    } else {
        if (!call.said.log || call.condensed_bytes != call.said.log->length)
            return why = "connection to ptyvisord lost while reading the output", false;
        const auto& log = *call.said.log;
        from = log.offset + log.length;
        if (log.length == 0) return false;
    }
    if (from >= call.read_to) return false;
    call.connection = client::Connection();
    call.said = client::Transcript{};
    call.condensed_bytes = 0;
    if (!call.connection.connect(*call.socket_path, why)) return why = "cannot reach ptyvisord: " + why, false;
    call.deadline = std::chrono::steady_clock::now() + kReadTimeout;
    return call.connection.queue_read(
        {e.id, {protocol::LogPosition::Kind::Offset, from}, std::min(call.read_to - from, kReadWindowBytes)}, why);
}

// The first page's LOG says where the output begins: the condenser starts there.
void exec_on_event(ToolCall& call, const client::Event& event) {
    const auto* log = std::get_if<client::Log>(&event);
    if (!log || call.condenser) return;
    const auto& e = std::get<ExecArgs>(call.args);
    if (call.executed && call.executed->command && log->reply.offset > call.executed->command->output_start)
        call.output_dropped = true;
    call.condenser = std::make_unique<Condenser>(log->reply.offset, CondenseOptions{.budget = e.max_output_bytes});
}

ToolResult exec_result(ToolCall& call) {
    if (!call.executed) return ToolResult::error("connection to ptyvisord lost");
    const auto& reply = *call.executed;
    json j = json::object();
    j["exit_code"] = reply.exit_code ? json(*reply.exit_code) : json(nullptr);
    switch (reply.state) {
        case Outcome::Exited: j["state"] = "exited"; break;
        case Outcome::Interrupted:
            j["state"] = "exited";
            j["interrupted"] = true;
            break;
        case Outcome::SessionEnded:
            j["state"] = "exited";
            j["exit_code"] = nullptr;
            j["session_ended"] = true;
            break;
        case Outcome::Timeout: j["state"] = "timeout"; break;
        case Outcome::WaitingForInput: j["state"] = "waiting_for_input"; break;
    }
    std::string output;
    bool truncated = call.output_dropped;
    if (call.condenser) {
        auto condensed = call.condenser->finish(Ending::Final);
        output = std::move(condensed.text);
        truncated = truncated || condensed.truncated;
    }
    j["output"] = std::move(output);
    j["truncated"] = truncated;
    j["seq"] = reply.command ? json(reply.command->seq) : json(nullptr);
    if (reply.command) j["offsets"] = {{"start", reply.command->output_start}, {"end", output_end(reply)}};
    return ToolResult::ok(std::move(j));
}

ToolResult exec_refused(const ToolCall& call) {
    const auto& e = *call.said.error;
    switch (e.code) {
        case protocol::ErrorCode::NoShellIntegration:
            return ToolResult::error("this session's shell does not report its commands: start one with "
                                     "terminal_start {argv: [\"bash\"], shell_integration: true} and run the "
                                     "command there (no_shell_integration)");
        case protocol::ErrorCode::Busy:
            return ToolResult::error("another terminal_exec is running in this session; wait for it (busy)");
        case protocol::ErrorCode::UnsupportedVersion:
            return ToolResult::error("ptyvisord is older than protocol version 4: it does not offer terminal_exec");
        default: break;
    }
    return ToolResult::error(error_text(e));
}

}  // namespace

constinit const ToolDefinition kTerminalExec{
    .name = "terminal_exec",
    .args_index = kArgsIndex<ExecArgs>,
    .describe = exec_tool,
    .parse = parse_as<ExecArgs, parse_exec>,
    .request = request_exec,
    .result = exec_result,
    .refused = exec_refused,
    .on_event = exec_on_event,
    .next = exec_next,
};

}  // namespace ptyvisor::cli::mcp
