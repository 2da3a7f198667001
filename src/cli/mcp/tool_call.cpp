#include "cli/mcp/tool_call.h"

#include <algorithm>
#include <type_traits>

namespace ptyvisor::cli::mcp {

std::optional<ReadCursors::Cursor> ReadCursors::find(const std::string& id) const {
    const auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    return it->second.cursor;
}

void ReadCursors::remember(const std::string& id, std::uint64_t offset, ParseState state) {
    entries_[id] = {{offset, state}, ++clock_};
    if (entries_.size() <= kMaxCursors) return;
    const auto oldest = std::min_element(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
        return a.second.last_used < b.second.last_used;
    });
    entries_.erase(oldest);
}

void ToolCall::take_output(const std::vector<std::uint8_t>& bytes) {
    if (!condenser) {
        said.output.append(bytes.begin(), bytes.end());
        return;
    }
    condenser->feed(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    condensed_bytes += bytes.size();
}

void ToolCall::record(client::Event& event) {
    std::visit(
        [this](auto& e) {
            using T = std::decay_t<decltype(e)>;
            if constexpr (std::is_same_v<T, client::Started>)
                said.started = std::move(e);
            else if constexpr (std::is_same_v<T, client::Output>)
                take_output(e.bytes);
            else if constexpr (std::is_same_v<T, client::Exit>)
                said.exit = std::move(e.status);
            else if constexpr (std::is_same_v<T, client::Error>)
                said.error = std::move(e.reply);
            else if constexpr (std::is_same_v<T, client::Closed>)
                said.closed = true;
            else if constexpr (std::is_same_v<T, client::ProtocolViolation>)
                said.violation = std::move(e.message);
            else if constexpr (std::is_same_v<T, client::Attached>)
                said.attached = std::move(e.reply);
            else if constexpr (std::is_same_v<T, client::Detached>)
                said.detached = std::move(e.reply);
            else if constexpr (std::is_same_v<T, client::Sessions>)
                said.sessions = std::move(e.sessions);
            else if constexpr (std::is_same_v<T, client::Log>)
                said.log = std::move(e.reply);
            else if constexpr (std::is_same_v<T, client::Waited>)
                said.waited = std::move(e.reply);
            else if constexpr (std::is_same_v<T, client::Killed>)
                said.killed = std::move(e.reply);
            else if constexpr (std::is_same_v<T, client::Sent>)
                said.sent = e.reply;
            else if constexpr (std::is_same_v<T, client::Screen>)
                said.screen = std::move(e);
            else if constexpr (std::is_same_v<T, client::Executed>)
                said.executed = std::move(e.reply);
            else if constexpr (std::is_same_v<T, client::CommandList>)
                said.command_list = std::move(e.reply);
        },
        event);
}

}  // namespace ptyvisor::cli::mcp
