// SessionSubscriptions: the ResourceRunner of `ptyvisor mcp` (resource_runner.h). Reads
// sessions as resources from ptyvisord (LIST, and COMMANDS of protocol version 4) and keeps a
// WATCH open for each subscribed session, turning its EVENTs into
// notifications/resources/updated (session_resources.h says which). All in the caller's poll
// loop (collect() and dispatch()), like DaemonRunner: nothing here blocks.
//
// Invariants:
//   - Every request is answered exactly once (the `complete` callback), unless cancelled;
//     each waits at most kReplyTimeout for the daemon.
//   - At most kMaxSubscriptions sessions are subscribed (or being subscribed) at once; one
//     more is an error. A subscription holds one connection, its WATCH.
//   - A subscription is confirmed only once the daemon has answered a COMMANDS for the session
//     in version 4, sent after the WATCH: a daemon older than version 4, or an unknown
//     session, is the subscribe request's error.
//   - A WATCH that ends (the session exited: its "exit" event was the last; or the daemon
//     refused or closed it) is closed and forgotten, after one last notification that
//     tells the client to read the resource again.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/mcp/daemon_stream.h"
#include "cli/mcp/resource_runner.h"
#include "protocol/command_payloads.h"
#include "protocol/payloads.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::cli::mcp {

class SessionSubscriptions final : public ResourceRunner {
  public:
    // As many as a session takes readers (a WATCH is one).
    static constexpr std::size_t kMaxSubscriptions = 16;
    static constexpr std::chrono::milliseconds kReplyTimeout{20'000};

    using Complete = std::function<void(std::uint64_t call, const ResourceReply& reply)>;
    // `event`: the EVENT kind's name, or "watch_ended" when the daemon ended the WATCH early.
    using Updated = std::function<void(const std::string& uri, std::string_view event)>;

    SessionSubscriptions(std::string socket_path, Complete complete, Updated updated);

    void list(std::uint64_t call) override;
    void read(std::uint64_t call, const std::string& id) override;
    void subscribe(std::uint64_t call, const std::string& id) override;
    void unsubscribe(std::uint64_t call, const std::string& id) override;
    void cancel(std::uint64_t call) override;

    // Appends a pollfd for each open connection; `owners` gets a key for each.
    void collect(std::vector<pollfd>& fds, std::vector<std::uint64_t>& owners) const;
    // Handles what poll() reported for the fds collect() added (from `fds[first]` on), and
    // the deadlines that have passed.
    void dispatch(const std::vector<pollfd>& fds, std::size_t first, const std::vector<std::uint64_t>& owners);
    // Milliseconds until the nearest deadline (-1: none), for poll().
    [[nodiscard]] int poll_timeout_ms() const;

    [[nodiscard]] std::size_t subscriptions() const { return watches_.size(); }
    [[nodiscard]] std::size_t connections() const { return streams_.size(); }

  private:
    enum class Role { List, Commands, Watch };
    struct Stream {
        DaemonStream stream;
        Role role = Role::List;
        std::uint64_t call = 0;  // the request it serves; 0 for a confirmed WATCH
        std::string id;          // the session (Commands, Watch)
        std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    };
    enum class Kind { List, Read, Subscribe };
    struct Request {
        Kind kind = Kind::List;
        std::string id;
        bool list_done = false;      // List, Read
        bool commands_done = false;  // Read, Subscribe (the probe)
        std::optional<std::vector<protocol::SessionInfo>> sessions;
        std::optional<protocol::CommandListReply> commands;
        std::optional<protocol::ErrorReply> list_refused, commands_refused;
        std::optional<std::string> failure;  // the first thing that went wrong otherwise
        std::uint64_t watch = 0;             // Subscribe: its WATCH stream (0: it has ended)
        std::optional<std::string> watch_failure;
    };

    void start_request(std::uint64_t call, Kind kind, const std::string& id);
    bool open_stream(std::uint64_t call, Role role, const std::string& id, std::string& why);
    void service(std::uint64_t key, short revents);
    void handle_frame(std::uint64_t key, Stream& s, protocol::Frame& frame, bool& done);
    void stream_finished(std::uint64_t key, const std::optional<std::string>& failure);
    void watch_ended(const std::string& id, std::string_view event);
    void check(std::uint64_t call);
    void answer(std::uint64_t call, const ResourceReply& reply);
    void fail_at_once(std::uint64_t call, const std::string& why);
    [[nodiscard]] std::size_t subscribes_pending() const;

    std::string socket_path_;
    Complete complete_;
    Updated updated_;
    std::uint64_t next_stream_ = 1;
    std::map<std::uint64_t, Stream> streams_;
    std::map<std::uint64_t, Request> requests_;
    std::map<std::string, std::uint64_t> watches_;  // confirmed: session id -> its WATCH stream
};

}  // namespace ptyvisor::cli::mcp
