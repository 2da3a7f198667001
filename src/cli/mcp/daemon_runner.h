// DaemonRunner: runs MCP tool calls against ptyvisord, each on its own connection, all in
// the caller's poll loop (collect() and dispatch()): nothing here blocks, so a long
// terminal_wait never holds up another call or a ping. What each tool asks and answers is
// its ToolDefinition's (tool_definition.h); this moves the calls along.
//
// Invariants:
//   - A call ends exactly once: with a result through the `complete` callback, or silently
//     by cancel(). Its connection (the only descriptor it holds) closes when it ends.
//   - Every call has a deadline; a daemon that hangs or goes away gives a tool error, never
//     a stuck or dead server.
//   - terminal_read's cursors (where the last read of each session stopped) are bounded in
//     number: the least recently used goes first.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/mcp/mcp_session.h"
#include "cli/mcp/tool_call.h"
#include "cli/mcp/tools.h"

namespace ptyvisor::cli::mcp {

class DaemonRunner final : public ToolRunner {
  public:
    using Complete = std::function<void(std::uint64_t call, const ToolResult& result)>;

    DaemonRunner(std::string socket_path, Complete complete);
    ~DaemonRunner() override;

    void start(std::uint64_t call, const ToolArgs& args) override;
    void cancel(std::uint64_t call) override;

    // Appends a pollfd for each call in flight; `owners` gets the call of each.
    void collect(std::vector<pollfd>& fds, std::vector<std::uint64_t>& owners) const;
    // Handles what poll() reported for the fds collect() added (from `fds[first]` on), and
    // the deadlines that have passed.
    void dispatch(const std::vector<pollfd>& fds, std::size_t first, const std::vector<std::uint64_t>& owners);
    // Milliseconds until the nearest deadline (-1: no call in flight), for poll().
    [[nodiscard]] int poll_timeout_ms() const;
    // Brings every deadline to within `grace` from now: the client has closed stdin (it is
    // shutting down), and a long terminal_wait must not keep the server alive for minutes.
    void limit_deadlines(std::chrono::milliseconds grace);

  private:
    void start_call(std::uint64_t call, const ToolArgs& args);
    void service(ToolCall& call, short revents);
    void finish(std::uint64_t call, const ToolResult& result);
    static ToolResult result_of(ToolCall& call);

    std::string socket_path_;
    Complete complete_;
    std::map<std::uint64_t, std::unique_ptr<ToolCall>> calls_;
    ReadCursors cursors_;
    bool closing_ = false;  // limit_deadlines() was called
};

}  // namespace ptyvisor::cli::mcp
