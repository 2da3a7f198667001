// The console's server: HTTP and WebSocket on one listener (TCP or a Unix socket), bridging
// each terminal socket to a ptyvisord connection (docs/console-api.md is the contract).
//
// Invariants:
//   - One thread, one event loop: nothing in it blocks but connect() to the daemon's Unix
//     socket, bounded by kDaemonConnectTimeout (a daemon whose queue is full).
//   - No request is served before its Host and token are checked (request_rules.h).
//   - Every buffer is bounded: request headers 8 KiB and no body, page messages 64 KiB,
//     what waits to go to one WebSocket about 1 MiB (past it the daemon connection is not read,
//     so the daemon drops old output for this observer), 64 connections at a time.
//   - No exception leaves a handler: a failure closes that connection only.
//   - With no events socket open, nothing asks the daemon anything.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace ptyvisor::web {

inline constexpr std::chrono::milliseconds kDaemonConnectTimeout{2000};
inline constexpr std::size_t kMaxConnections = 64;
inline constexpr std::size_t kMaxHeaderBytes = 8 * 1024;
inline constexpr std::size_t kMaxPageMessage = 64 * 1024;
inline constexpr std::size_t kMaxQueuedPerSocket = 1024 * 1024;
inline constexpr std::chrono::seconds kIdleHttpTimeout{30};
inline constexpr std::uint64_t kReplayBytes = 256 * 1024;

struct ServerConfig {
    bool unix_socket = false;
    std::string listen_host = "127.0.0.1";  // TCP: a numeric address or "localhost"
    std::uint16_t port = 8650;              // TCP: 0 picks a free one
    std::string unix_path;                  // --unix
    std::string token;
    std::string daemon_socket;
    std::string version;  // "ptyvisor X.Y"
    uid_t uid = 0;
    std::string user;
};

// Listens, prints the URL as the first line of stdout, serves until SIGINT or SIGTERM.
// Returns the process's exit status: 0 after a signal, 1 when it cannot listen.
int serve(const ServerConfig& config);

}  // namespace ptyvisor::web
