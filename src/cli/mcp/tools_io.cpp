// The input and output tools: terminal_write, terminal_read and terminal_wait. Each tool's
// definition, argument check, request and result sit together, then its ToolDefinition.
#include <algorithm>
#include <chrono>
#include <limits>
#include <span>

#include "cli/mcp/tool_arguments.h"
#include "cli/mcp/tool_definition.h"
#include "cli/mcp/tool_replies.h"
#include "cli/mcp/tool_schema.h"
#include "cli/options.h"
#include "cli/send_keys.h"
#include "protocol/command_record.h"

namespace ptyvisor::cli::mcp {
namespace {

using nlohmann::json;
using namespace schema;
using namespace arguments;

// What WAIT gets beyond its own timeout before we call the daemon hung.
constexpr std::chrono::milliseconds kWaitMargin{15'000};

// --- terminal_write --------------------------------------------------------------------------

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

bool request_write(ToolCall& call, std::string& why) {
    const auto& w = std::get<WriteArgs>(call.args);
    return call.connection.queue_send(
        w.id, std::span(reinterpret_cast<const std::uint8_t*>(w.bytes.data()), w.bytes.size()), why);
}

ToolResult write_result(ToolCall& call) {
    const auto& s = call.said;
    if (!s.sent) return ToolResult::error("connection to ptyvisord lost");
    return ToolResult::ok({{"id", std::get<WriteArgs>(call.args).id}, {"bytes", s.sent->bytes}});
}

// --- terminal_read ---------------------------------------------------------------------------

json read_tool() {
    return {{"name", "terminal_read"},
            {"title", "Read a terminal's output"},
            {"description",
             "Read what a session has printed, as the lines its terminal finally showed. By "
             "default it continues where the last terminal_read of this session stopped (the "
             "first read starts at the beginning), so calling it repeatedly returns each piece of "
             "output once. Progress bars and redrawn lines come out as they were last drawn; "
             "escape sequences (colours, cursor movement) are removed unless strip_ansi is false. "
             "The text is at most max_bytes: when the new output is longer, you get its first and "
             "last lines and, between them, one line [... N bytes omitted (...) ...] that gives "
             "the log offsets left out. To read those, pass offset and to: the range is then "
             "returned in order, max_bytes at a time (continue from next_offset). Returns text, "
             "offset (where this text begins in the session's output), next_offset (where to "
             "continue), more (true: more output is already there, read again now), truncated "
             "and omitted_bytes/omitted_from/omitted_to (what the marker line stands for), "
             "dropped_bytes (output lost because the session's log is bounded and it was not "
             "read in time), and the session's state and exit status. For a full-screen program "
             "(vim, top), terminal_screen shows the screen better."},
            {"inputSchema",
             object_schema(
                 {{"id", id_property()},
                  {"offset",
                   {{"type", "integer"},
                    {"minimum", 0},
                    {"description", "Byte offset to read from (default: where the last read stopped, else 0)."}}},
                  {"to",
                   {{"type", "integer"},
                    {"minimum", 1},
                    {"description",
                     "Byte offset to stop before: read the range in order, nothing left out, "
                     "max_bytes of text at a time (default: all new output, its middle left out "
                     "if too long)."}}},
                  {"max_bytes",
                   {{"type", "integer"},
                    {"minimum", 1},
                    {"maximum", kMaxReadBytes},
                    {"description", "Most bytes of text to return (default 16384, at most 65536)."}}},
                  {"strip_ansi", {{"type", "boolean"}, {"description", "Remove escape sequences (default true)."}}}},
                 {"id"})},
            {"outputSchema",
             output_schema({{"id", id_property()},
                            {"text", {{"type", "string"}}},
                            {"offset", {{"type", "integer"}}},
                            {"next_offset", {{"type", "integer"}}},
                            {"end", {{"type", "integer"}}},
                            {"more", {{"type", "boolean"}}},
                            {"truncated", {{"type", "boolean"}}},
                            {"omitted_bytes", {{"type", "integer"}}},
                            {"omitted_from", {{"type", "integer"}}},
                            {"omitted_to", {{"type", "integer"}}},
                            {"dropped_bytes", {{"type", "integer"}}},
                            {"state", state_property()},
                            {"exit", exit_property()}},
                           {"id", "text", "offset", "next_offset", "end", "more", "truncated", "dropped_bytes",
                            "state"})}};
}

bool parse_read(const json& args, ReadArgs& out, std::string& why) {
    if (!only_members(args, {"id", "offset", "to", "max_bytes", "strip_ansi"}, why) || !get_id(args, out.id, why))
        return false;
    std::optional<std::uint64_t> max_bytes;
    constexpr auto kMaxOffset = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (!get_uint(args, "offset", 0, kMaxOffset, out.offset, why) || !get_uint(args, "to", 1, kMaxOffset, out.to, why) ||
        !get_uint(args, "max_bytes", 1, kMaxReadBytes, max_bytes, why) ||
        !get_bool(args, "strip_ansi", out.strip_ansi, why))
        return false;
    if (out.offset && out.to && *out.to <= *out.offset) return why = "'to' must be greater than 'offset'", false;
    out.max_bytes = max_bytes.value_or(kDefaultReadBytes);
    return true;
}

bool request_read(ToolCall& call, std::string& why) {
    const auto& r = std::get<ReadArgs>(call.args);
    // Offset 0, not "start": a log that has already let go of its beginning then shows
    // in dropped_bytes.
    protocol::LogPosition from{protocol::LogPosition::Kind::Offset, 0};
    const auto cursor = call.cursors->find(r.id);
    if (r.offset) {
        from = {protocol::LogPosition::Kind::Offset, *r.offset};
    } else if (cursor) {
        from = {protocol::LogPosition::Kind::Offset, cursor->offset};
    }
    if (r.to && *r.to <= from.offset)
        return why = "'to' must be greater than the offset read from (" + std::to_string(from.offset) + ")", false;
    call.read_from = from.offset;
    // The parser's state carries over only when this read begins where the last stopped.
    if (cursor && cursor->offset == from.offset) call.read_state = cursor->state;
    const std::uint64_t window = r.to ? std::min(*r.to - from.offset, kReadWindowBytes) : kReadWindowBytes;
    return call.connection.queue_read({r.id, from, window}, why);
}

// The LOG reply says where the bytes begin: the condenser they go through starts there.
void read_on_event(ToolCall& call, const client::Event& event) {
    const auto* log = std::get_if<client::Log>(&event);
    if (!log) return;
    const auto& r = std::get<ReadArgs>(call.args);
    call.condenser = std::make_unique<Condenser>(
        log->reply.offset,
        CondenseOptions{.budget = r.max_bytes,
                        .keep_escapes = !r.strip_ansi,
                        .in_order = r.to.has_value(),
                        .state = log->reply.offset == call.read_from ? call.read_state : ParseState::Ground});
}

ToolResult read_result(ToolCall& call) {
    const auto& r = std::get<ReadArgs>(call.args);
    const auto& s = call.said;
    if (!s.log || !call.condenser || call.condensed_bytes != s.log->length)
        return ToolResult::error("connection to ptyvisord lost while reading");
    const auto& log = *s.log;
    const std::uint64_t read_end = log.offset + log.length;
    const bool more = read_end < log.end;
    Ending ending = Ending::ForNow;
    if (log.state == protocol::State::Exited && !more)
        ending = Ending::Final;  // nothing will follow these bytes: hold nothing back
    else if (more && !(r.to && read_end >= *r.to))
        ending = Ending::Cut;  // the next read has the unfinished last line whole
    if (call.condenser->parsed_to() == log.offset && log.length > 0 && more)
        ending = Ending::Final;  // all of it one split sequence: take it as it is rather than never move on
    auto out = call.condenser->finish(ending);
    // Stopped short of what was parsed: a page was full, or a line was held back.
    const bool stopped = out.consumed_to < call.condenser->parsed_to();
    call.cursors->remember(r.id, out.consumed_to, out.state);
    const std::uint64_t dropped = log.offset > call.read_from ? log.offset - call.read_from : 0;
    json j = {{"id", r.id},
              {"text", std::move(out.text)},
              {"offset", log.offset},
              {"next_offset", out.consumed_to},
              {"end", log.end},
              {"more", more || stopped},
              {"truncated", out.truncated},
              {"dropped_bytes", dropped},
              {"state", state_name(log.state)},
              {"exit", exit_json(log.exit)}};
    if (out.truncated) {
        j["omitted_bytes"] = out.omitted_bytes;
        j["omitted_from"] = out.omitted_from;
        j["omitted_to"] = out.omitted_to;
    }
    return ToolResult::ok(std::move(j));
}

// --- terminal_wait ---------------------------------------------------------------------------

json wait_tool() {
    return {
        {"name", "terminal_wait"},
        {"title", "Wait for a terminal"},
        {"description",
         "Wait until a session exits, prints text matching a regular expression, goes quiet "
         "(prints nothing for quiet_ms milliseconds), waits for input (\"input\": its program "
         "sleeps reading the terminal, a shell's prompt included; the kernel tells, no guessing), "
         "shows its shell's prompt (\"prompt\"), or ends a command (\"command\": the next "
         "command of a shell_integration session to end, or the first whose seq is greater than "
         "`after`; the result then has its record under `command`), or until timeout_ms passes. "
         "Use it instead of sleeping: after terminal_start, wait for the line that says a server "
         "is ready; after terminal_write, wait for input or for quiet. After a terminal_exec "
         "that returned waiting_for_input and your answer, wait for command with after = seq - 1. `pattern` is an RE2 regular expression searched in the raw output (escape "
         "sequences included) from `from` (default: the start of the output; give the "
         "next_offset of your last terminal_read to match only newer output). Returns reason "
         "(\"exit\", \"text\", \"quiet\", \"input\", \"prompt\", \"command\", \"timeout\", or \"exited\": the session ended first), "
         "offset (the output's end then), match_start/match_end for text, state and exit."},
        {"inputSchema",
         object_schema({{"id", id_property()},
                        {"for",
                         {{"type", "string"},
                          {"enum", {"exit", "text", "quiet", "input", "prompt", "command"}},
                          {"description",
                           "What to wait for (default: text when pattern is given, quiet when "
                           "quiet_ms is, else exit)."}}},
                        {"pattern", {{"type", "string"}, {"description", "RE2 regular expression, for text."}}},
                        {"quiet_ms",
                         {{"type", "integer"}, {"minimum", 1}, {"maximum", kMaxWaitMs}, {"description", "For quiet."}}},
                        {"from",
                         {{"type", {"integer", "string"}},
                          {"description", "For text: \"start\" (default), \"tail\" (only new output) or an offset."}}},
                        {"after",
                         {{"type", "integer"},
                          {"minimum", 0},
                          {"description",
                           "For command: wait for a command whose seq is greater (default: the next "
                           "to end)."}}},
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
                                        {"command", {{"type", "object"}}},
                                        {"state", state_property()},
                                        {"exit", exit_property()}},
                                       {"reason", "matched", "offset", "state"})}};
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
    if (!only_members(args, {"id", "for", "pattern", "quiet_ms", "from", "after", "timeout_ms"}, why) ||
        !get_id(args, r.id, why))
        return false;
    std::optional<std::string> what, pattern;
    std::optional<std::uint64_t> quiet_ms, timeout_ms, after;
    if (!get_string(args, "for", what, why) || !get_string(args, "pattern", pattern, why) ||
        !get_uint(args, "quiet_ms", 1, kMaxWaitMs, quiet_ms, why) ||
        !get_uint(args, "timeout_ms", 1, kMaxWaitMs, timeout_ms, why) ||
        !get_uint(args, "after", 0, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), after, why))
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
    } else if (*what == "input") {
        r.what = For::Input;
    } else if (*what == "prompt") {
        r.what = For::Prompt;
    } else if (*what == "command") {
        r.what = For::Command;
        r.after = after;
    } else {
        return why = "'for' must be \"exit\", \"text\", \"quiet\", \"input\", \"prompt\" or \"command\"", false;
    }
    if (after && r.what != For::Command) return why = "'after' applies to waiting for command only", false;
    if (pattern && r.what != For::Text) return why = "'pattern' applies to waiting for text only", false;
    if (quiet_ms && r.what != For::Quiet) return why = "'quiet_ms' applies to waiting for quiet only", false;
    if (const json* from = member(args, "from")) {
        if (r.what != For::Text) return why = "'from' applies to waiting for text only", false;
        if (!parse_position(*from, r.from, why)) return why = "'from': " + why, false;
    }
    r.timeout_ms = timeout_ms.value_or(kDefaultWaitMs);
    return true;
}

bool request_wait(ToolCall& call, std::string& why) {
    const auto& wait = std::get<WaitArgs>(call.args);
    call.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait.request.timeout_ms) + kWaitMargin;
    return call.connection.queue_wait(wait.request, why);
}

ToolResult wait_result(ToolCall& call) {
    const auto& s = call.said;
    if (!s.waited) return ToolResult::error("connection to ptyvisord lost");
    const auto& w = *s.waited;
    json j = {{"reason", w.reason},
              {"matched", w.matched},
              {"offset", w.offset},
              {"state", state_name(w.state)},
              {"exit", exit_json(w.exit)}};
    if (w.reason == "text") {
        j["match_start"] = w.match_start;
        j["match_end"] = w.match_end;
    }
    if (w.command) j["command"] = json::parse(protocol::encode(*w.command));
    return ToolResult::ok(std::move(j));
}

}  // namespace

constinit const ToolDefinition kTerminalWrite{
    .name = "terminal_write",
    .args_index = kArgsIndex<WriteArgs>,
    .describe = write_tool,
    .parse = parse_as<WriteArgs, parse_write>,
    .request = request_write,
    .result = write_result,
};

constinit const ToolDefinition kTerminalRead{
    .name = "terminal_read",
    .args_index = kArgsIndex<ReadArgs>,
    .describe = read_tool,
    .parse = parse_as<ReadArgs, parse_read>,
    .request = request_read,
    .result = read_result,
    .on_event = read_on_event,
};

constinit const ToolDefinition kTerminalWait{
    .name = "terminal_wait",
    .args_index = kArgsIndex<WaitArgs>,
    .describe = wait_tool,
    .parse = parse_as<WaitArgs, parse_wait>,
    .request = request_wait,
    .result = wait_result,
};

}  // namespace ptyvisor::cli::mcp
