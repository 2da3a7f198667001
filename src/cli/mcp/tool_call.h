// ToolCall: one MCP tool call in flight against ptyvisord: its arguments, its connection (the
// only descriptor it holds), its deadline and what the daemon has said so far. The tool's
// ToolDefinition (tool_definition.h) queues its request and makes its result; DaemonRunner
// moves it along.
//
// ReadCursors: where the last terminal_read of each session stopped, and the escape-sequence
// parser's state there. Bounded in number: the least recently used goes first.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/mcp/condensed_output.h"
#include "cli/mcp/terminal_text.h"
#include "cli/mcp/tools.h"
#include "client/client.h"

namespace ptyvisor::cli::mcp {

class ReadCursors {
  public:
    struct Cursor {
        std::uint64_t offset = 0;
        ParseState state = ParseState::Ground;
    };
    // How many sessions' cursors are kept.
    static constexpr std::size_t kMaxCursors = 256;

    [[nodiscard]] std::optional<Cursor> find(const std::string& id) const;
    void remember(const std::string& id, std::uint64_t offset, ParseState state);

  private:
    struct Entry {
        Cursor cursor;
        std::uint64_t last_used = 0;
    };
    std::map<std::string, Entry> entries_;
    std::uint64_t clock_ = 0;
};

struct ToolDefinition;

struct ToolCall {
    std::uint64_t key = 0;
    const ToolDefinition* tool = nullptr;
    ToolArgs args;
    client::Connection connection;
    std::chrono::steady_clock::time_point deadline;
    client::Transcript said;
    ReadCursors* cursors = nullptr;  // the runner's, outliving the call
    const std::string* socket_path = nullptr;  // the runner's: where a next request connects
    std::uint64_t read_from = 0;     // terminal_read: the offset asked for
    ParseState read_state = ParseState::Ground;
    // terminal_read: the log's bytes go through this as they arrive, not into said.output.
    std::unique_ptr<Condenser> condenser;
    std::uint64_t condensed_bytes = 0;
    // terminal_exec: EXEC's reply, kept while the output is read; the range still to read.
    std::optional<protocol::ExecReply> executed;
    std::uint64_t read_to = 0;
    bool output_dropped = false;  // the log had let go of the output's start

    // Keeps what `event` says in `said` (its contents are moved there), but OUTPUT's bytes go
    // to `condenser` when there is one.
    void record(client::Event& event);

  private:
    void take_output(const std::vector<std::uint8_t>& bytes);
};

}  // namespace ptyvisor::cli::mcp
