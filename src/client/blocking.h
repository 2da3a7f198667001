// Blocking conveniences over Connection for tests and one-shot tools (`ptyvisor status`).
// An interactive client should put Connection::fd() in its own event loop instead.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "client/connection.h"
#include "client/events.h"

namespace ptyvisor::client {

// Flushes what is queued and waits until at least one event arrives; returns the events.
// Returns an empty vector if `timeout` passes first or the connection has already finished.
std::vector<Event> wait_for_events(Connection& connection, std::chrono::milliseconds timeout);

// Everything a connection produced, gathered by run_to_completion().
struct Transcript {
    std::optional<Started> started;
    std::string output;  // all OUTPUT bytes, concatenated
    std::optional<protocol::ExitStatus> exit;
    std::optional<protocol::ErrorReply> error;
    std::optional<Status> status;          // STATUS
    std::optional<std::string> violation;  // ProtocolViolation message
    bool closed = false;                   // the daemon closed the connection
};

// Flushes and reads until the connection finishes (Closed or ProtocolViolation).
// Throws ClientError if that takes longer than `timeout`.
Transcript run_to_completion(Connection& connection, std::chrono::milliseconds timeout);

}  // namespace ptyvisor::client
