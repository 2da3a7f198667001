#include "cli/mcp/tools.h"

#include <gtest/gtest.h>

#include <set>

namespace ptyvisor::cli::mcp {
namespace {

using nlohmann::json;

const std::string kId = "0123456789abcdef0123456789abcdef";

template <class T>
T parse_ok(std::string_view tool, const json& args) {
    ToolArgs out;
    std::string why;
    EXPECT_TRUE(parse_tool_arguments(tool, args, out, why)) << why;
    EXPECT_TRUE(std::holds_alternative<T>(out));
    return std::holds_alternative<T>(out) ? std::get<T>(out) : T{};
}

std::string parse_error(std::string_view tool, const json& args) {
    ToolArgs out;
    std::string why;
    EXPECT_FALSE(parse_tool_arguments(tool, args, out, why)) << args.dump();
    return why;
}

TEST(McpTools, EveryToolHasANameADescriptionAndAnObjectSchema) {
    const json tools = tool_definitions();
    ASSERT_EQ(tools.size(), 9u);
    std::set<std::string> names;
    for (const auto& t : tools) {
        names.insert(t.at("name").get<std::string>());
        EXPECT_TRUE(is_known_tool(t.at("name").get<std::string>()));
        EXPECT_GT(t.at("description").get<std::string>().size(), 80u) << t.at("name");
        EXPECT_EQ(t.at("inputSchema").at("type"), "object");
        if (t.contains("outputSchema")) {
            EXPECT_EQ(t.at("outputSchema").at("type"), "object");
        }
    }
    EXPECT_EQ(names, (std::set<std::string>{"terminal_start", "terminal_write", "terminal_read", "terminal_screen",
                                            "terminal_wait", "terminal_list", "terminal_kill", "terminal_resize",
                                            "terminal_exec"}));
    EXPECT_FALSE(is_known_tool("terminal_explode"));
}

TEST(McpTools, StartRunsACommandLineThroughTheShell) {
    const auto a = parse_ok<StartArgs>("terminal_start", {{"command", "make -j2 && ./test"}, {"cols", 120}});
    EXPECT_EQ(a.argv, (std::vector<std::string>{"/bin/sh", "-c", "make -j2 && ./test"}));
    EXPECT_EQ(a.size.cols, 120);
    EXPECT_EQ(a.size.rows, 24);
    EXPECT_EQ(a.term, "xterm-256color");
}

TEST(McpTools, StartTakesArgvEnvAndCwd) {
    const auto a = parse_ok<StartArgs>(
        "terminal_start", {{"argv", {"vim", "x.txt"}}, {"cwd", "/tmp"}, {"env", {{"TERM", "vt100"}, {"A", "1"}}}});
    EXPECT_EQ(a.argv, (std::vector<std::string>{"vim", "x.txt"}));
    EXPECT_EQ(a.cwd, "/tmp");
    EXPECT_EQ(a.term, "vt100");
    EXPECT_EQ(a.env_settings, (std::vector<std::string>{"A=1", "TERM=vt100"}));
}

TEST(McpTools, StartRefusesWhatItCannotRun) {
    EXPECT_EQ(parse_error("terminal_start", json::object()), "give exactly one of 'command' and 'argv'");
    EXPECT_EQ(parse_error("terminal_start", {{"command", "ls"}, {"argv", {"ls"}}}),
              "give exactly one of 'command' and 'argv'");
    EXPECT_EQ(parse_error("terminal_start", {{"command", 42}}), "'command' must be a string");
    EXPECT_EQ(parse_error("terminal_start", {{"argv", {"ls", 1}}}), "'argv' must be an array of strings");
    EXPECT_EQ(parse_error("terminal_start", {{"argv", json::array()}}), "'argv' needs a program name first");
    EXPECT_EQ(parse_error("terminal_start", {{"command", "ls"}, {"env", {{"A", 1}}}}),
              "'env': the value of A must be a string");
    EXPECT_EQ(parse_error("terminal_start", {{"command", "ls"}, {"cols", 0}}),
              "'cols' must be an integer from 1 to 65535");
    EXPECT_EQ(parse_error("terminal_start", {{"command", "ls"}, {"rows", 2.5}}),
              "'rows' must be an integer from 1 to 65535");
    EXPECT_EQ(parse_error("terminal_start", {{"command", "ls"}, {"shell", true}}), "unknown argument 'shell'");
}

TEST(McpTools, WriteSendsTextThenKeys) {
    const auto a = parse_ok<WriteArgs>("terminal_write", {{"id", kId}, {"text", "ls -l"}, {"keys", {"Enter"}}});
    EXPECT_EQ(a.id, kId);
    EXPECT_EQ(a.bytes, "ls -l\r");
    EXPECT_EQ(parse_ok<WriteArgs>("terminal_write", {{"id", kId}, {"keys", {"C-c", "Up"}}}).bytes, "\x03\x1b[A");
}

TEST(McpTools, WriteRefusesUnknownKeysAndNothing) {
    EXPECT_EQ(parse_error("terminal_write", {{"id", kId}, {"keys", {"Ctrl+C"}}}),
              "'keys': 'Ctrl+C' is not a key name (Enter, Tab, Up, C-c, M-x, F1, ...)");
    EXPECT_EQ(parse_error("terminal_write", {{"id", kId}}), "nothing to write: give 'text' or 'keys'");
    EXPECT_EQ(parse_error("terminal_write", {{"id", kId}, {"text", std::string(kMaxWriteBytes + 1, 'x')}}),
              "too much to write at once: 65537 bytes, at most 65536");
}

TEST(McpTools, AnIdMustBeASessionId) {
    EXPECT_EQ(parse_error("terminal_read", json::object()), "'id' is required");
    EXPECT_EQ(parse_error("terminal_read", {{"id", 7}}), "'id' must be a string");
    EXPECT_NE(parse_error("terminal_read", {{"id", "nope"}}).find("'id': "), std::string::npos);
}

TEST(McpTools, ReadHasDefaultsAndAHardCap) {
    const auto a = parse_ok<ReadArgs>("terminal_read", {{"id", kId}});
    EXPECT_FALSE(a.offset);
    EXPECT_EQ(a.max_bytes, kDefaultReadBytes);
    EXPECT_TRUE(a.strip_ansi);
    const auto b = parse_ok<ReadArgs>("terminal_read", {{"id", kId}, {"offset", 10}, {"strip_ansi", false}});
    EXPECT_EQ(b.offset, 10u);
    EXPECT_FALSE(b.strip_ansi);
    EXPECT_EQ(parse_error("terminal_read", {{"id", kId}, {"max_bytes", kMaxReadBytes + 1}}),
              "'max_bytes' must be an integer from 1 to 65536");
    EXPECT_EQ(parse_error("terminal_read", {{"id", kId}, {"offset", -1}}),
              "'offset' must be an integer from 0 to 9223372036854775807");
    EXPECT_EQ(parse_error("terminal_read", {{"id", kId}, {"strip_ansi", "yes"}}), "'strip_ansi' must be true or false");
}

TEST(McpTools, ReadTakesARangeToPageThrough) {
    const auto a = parse_ok<ReadArgs>("terminal_read", {{"id", kId}, {"offset", 1000}, {"to", 124456}});
    EXPECT_EQ(a.offset, 1000u);
    EXPECT_EQ(a.to, 124456u);
    EXPECT_FALSE(parse_ok<ReadArgs>("terminal_read", {{"id", kId}}).to);
    EXPECT_EQ(parse_error("terminal_read", {{"id", kId}, {"offset", 10}, {"to", 10}}), "'to' must be greater than 'offset'");
    EXPECT_EQ(parse_error("terminal_read", {{"id", kId}, {"to", 0}}),
              "'to' must be an integer from 1 to 9223372036854775807");
}

TEST(McpTools, WaitInfersWhatToWaitFor) {
    using For = protocol::WaitRequest::For;
    const auto text = parse_ok<WaitArgs>("terminal_wait", {{"id", kId}, {"pattern", "Serving HTTP"}});
    EXPECT_EQ(text.request.what, For::Text);
    EXPECT_EQ(text.request.pattern, "Serving HTTP");
    EXPECT_EQ(text.request.timeout_ms, kDefaultWaitMs);
    const auto quiet = parse_ok<WaitArgs>("terminal_wait", {{"id", kId}, {"quiet_ms", 500}, {"timeout_ms", 2000}});
    EXPECT_EQ(quiet.request.what, For::Quiet);
    EXPECT_EQ(quiet.request.quiet_ms, 500u);
    EXPECT_EQ(quiet.request.timeout_ms, 2000u);
    EXPECT_EQ(parse_ok<WaitArgs>("terminal_wait", {{"id", kId}}).request.what, For::Exit);
    const auto tail = parse_ok<WaitArgs>("terminal_wait", {{"id", kId}, {"pattern", "x"}, {"from", "tail"}});
    EXPECT_EQ(tail.request.from.kind, protocol::LogPosition::Kind::Tail);
    const auto at = parse_ok<WaitArgs>("terminal_wait", {{"id", kId}, {"pattern", "x"}, {"from", 42}});
    EXPECT_EQ(at.request.from, (protocol::LogPosition{protocol::LogPosition::Kind::Offset, 42}));
}

TEST(McpTools, WaitForInputPromptAndCommand) {
    using For = protocol::WaitRequest::For;
    EXPECT_EQ(parse_ok<WaitArgs>("terminal_wait", {{"id", kId}, {"for", "input"}}).request.what, For::Input);
    EXPECT_EQ(parse_ok<WaitArgs>("terminal_wait", {{"id", kId}, {"for", "prompt"}}).request.what, For::Prompt);
    const auto next = parse_ok<WaitArgs>("terminal_wait", {{"id", kId}, {"for", "command"}});
    EXPECT_EQ(next.request.what, For::Command);
    EXPECT_EQ(next.request.after, std::nullopt) << "the daemon's default: the next command to end";
    EXPECT_EQ(parse_ok<WaitArgs>("terminal_wait", {{"id", kId}, {"for", "command"}, {"after", 4}}).request.after,
              std::optional<std::uint64_t>(4));
}

TEST(McpTools, ExecTakesOneCommandLine) {
    const auto e = parse_ok<ExecArgs>("terminal_exec", {{"id", kId}, {"command", "make test"}});
    EXPECT_EQ(e.command, "make test");
    EXPECT_EQ(e.timeout_ms, kDefaultWaitMs);
    EXPECT_EQ(e.max_output_bytes, kDefaultExecOutputBytes);
    const auto f = parse_ok<ExecArgs>(
        "terminal_exec", {{"id", kId}, {"command", "ls"}, {"timeout_ms", 5000}, {"max_output_bytes", 100}});
    EXPECT_EQ(f.timeout_ms, 5000u);
    EXPECT_EQ(f.max_output_bytes, 100u);
    EXPECT_EQ(parse_error("terminal_exec", {{"id", kId}}), "'command' is required");
    EXPECT_EQ(parse_error("terminal_exec", {{"id", kId}, {"command", "a\nb"}}).rfind("'command': ", 0), 0u);
    EXPECT_EQ(parse_error("terminal_exec", {{"id", kId}, {"command", ""}}).rfind("'command': ", 0), 0u);
    EXPECT_FALSE(parse_error("terminal_exec", {{"id", kId}, {"command", "ls"}, {"max_output_bytes", 0}}).empty());
    EXPECT_FALSE(parse_error("terminal_exec", {{"id", kId}, {"command", "ls"}, {"interrupt", true}}).empty());
}

TEST(McpTools, StartWithShellIntegration) {
    const auto bare = parse_ok<StartArgs>("terminal_start", {{"shell_integration", true}});
    EXPECT_TRUE(bare.shell_integration);
    EXPECT_EQ(bare.argv, std::vector<std::string>{"bash"});
    const auto zsh = parse_ok<StartArgs>("terminal_start", {{"argv", {"zsh"}}, {"shell_integration", true}});
    EXPECT_EQ(zsh.argv, std::vector<std::string>{"zsh"});
    EXPECT_FALSE(parse_ok<StartArgs>("terminal_start", {{"command", "true"}}).shell_integration);
    EXPECT_NE(parse_error("terminal_start", {{"command", "bash"}, {"shell_integration", true}}).find("argv"),
              std::string::npos);
}

TEST(McpTools, WaitRefusesContradictions) {
    EXPECT_EQ(parse_error("terminal_wait", {{"id", kId}, {"for", "text"}}),
              "waiting for text needs a non-empty 'pattern'");
    EXPECT_EQ(parse_error("terminal_wait", {{"id", kId}, {"for", "exit"}, {"pattern", "x"}}),
              "'pattern' applies to waiting for text only");
    EXPECT_EQ(parse_error("terminal_wait", {{"id", kId}, {"for", "nap"}}),
              "'for' must be \"exit\", \"text\", \"quiet\", \"input\", \"prompt\" or \"command\"");
    EXPECT_EQ(parse_error("terminal_wait", {{"id", kId}, {"for", "exit"}, {"after", 3}}),
              "'after' applies to waiting for command only");
    EXPECT_EQ(parse_error("terminal_wait", {{"id", kId}, {"timeout_ms", kMaxWaitMs + 1}}),
              "'timeout_ms' must be an integer from 1 to 600000");
    EXPECT_EQ(parse_error("terminal_wait", {{"id", kId}, {"pattern", std::string(2000, 'a')}}),
              "'pattern' is longer than 1024 bytes");
}

TEST(McpTools, KillTakesSignalNamesAndNumbers) {
    EXPECT_EQ(parse_ok<KillArgs>("terminal_kill", {{"id", kId}}).signal, 0);
    EXPECT_EQ(parse_ok<KillArgs>("terminal_kill", {{"id", kId}, {"signal", "INT"}}).signal, 2);
    EXPECT_EQ(parse_ok<KillArgs>("terminal_kill", {{"id", kId}, {"signal", "SIGTERM"}}).signal, 15);
    EXPECT_EQ(parse_ok<KillArgs>("terminal_kill", {{"id", kId}, {"signal", 9}}).signal, 9);
    EXPECT_EQ(parse_error("terminal_kill", {{"id", kId}, {"signal", 0}}), "'signal' must be an integer from 1 to 64");
    EXPECT_NE(parse_error("terminal_kill", {{"id", kId}, {"signal", "NOPE"}}).find("'signal': "), std::string::npos);
}

TEST(McpTools, ResizeNeedsBothDimensions) {
    const auto a = parse_ok<ResizeArgs>("terminal_resize", {{"id", kId}, {"cols", 100}, {"rows", 30}});
    EXPECT_EQ(a.size, (protocol::WindowSize{30, 100}));
    EXPECT_EQ(parse_error("terminal_resize", {{"id", kId}, {"cols", 100}}), "'cols' and 'rows' are required");
}

TEST(McpTools, ScreenTakesScrollbackAndAttributes) {
    const auto plain = parse_ok<ScreenArgs>("terminal_screen", {{"id", kId}});
    EXPECT_EQ(plain.id, kId);
    EXPECT_EQ(plain.scrollback, 0u);
    EXPECT_FALSE(plain.attributes);
    const auto full =
        parse_ok<ScreenArgs>("terminal_screen", {{"id", kId}, {"scrollback", 10000}, {"attributes", true}});
    EXPECT_EQ(full.scrollback, 10000u);
    EXPECT_TRUE(full.attributes);
}

TEST(McpTools, ScreenRefusesWhatASnapshotCannotAsk) {
    EXPECT_EQ(parse_error("terminal_screen", json::object()), "'id' is required");
    EXPECT_EQ(parse_error("terminal_screen", {{"id", kId}, {"scrollback", 10001}}),
              "'scrollback' must be an integer from 0 to 10000");
    EXPECT_EQ(parse_error("terminal_screen", {{"id", kId}, {"scrollback", -1}}),
              "'scrollback' must be an integer from 0 to 10000");
    EXPECT_EQ(parse_error("terminal_screen", {{"id", kId}, {"attributes", "yes"}}),
              "'attributes' must be true or false");
    EXPECT_EQ(parse_error("terminal_screen", {{"id", kId}, {"colours", true}}), "unknown argument 'colours'");
    const json tools = tool_definitions();
    for (const auto& t : tools)
        if (t.at("name") == "terminal_screen") {
            EXPECT_EQ(t.at("inputSchema").at("properties").at("scrollback").at("maximum"), 10000);
            EXPECT_TRUE(t.contains("outputSchema"));
        }
}

TEST(McpTools, ArgumentsMustBeAnObject) {
    EXPECT_EQ(parse_error("terminal_list", json::array()), "the arguments must be an object");
    EXPECT_EQ(parse_error("terminal_list", {{"all", true}}), "unknown argument 'all'");
    parse_ok<ListArgs>("terminal_list", json::object());
}

}  // namespace
}  // namespace ptyvisor::cli::mcp
