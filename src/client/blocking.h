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

// Flushes what is queued and waits until at least one event arrives, into `events`; they
// are empty if `timeout` passes first or the connection has already finished. False with
// `why` when waiting or reading fails.
bool wait_for_events(Connection& connection, std::chrono::milliseconds timeout, std::vector<Event>& events,
                     std::string& why);

// Everything a connection produced, gathered by run_to_completion().
struct Transcript {
    std::optional<Started> started;
    std::string output;  // all OUTPUT bytes, concatenated
    std::optional<protocol::ExitStatus> exit;
    std::optional<protocol::ErrorReply> error;
    std::optional<Status> status;          // STATUS
    std::optional<std::string> violation;  // ProtocolViolation message
    bool closed = false;                   // the daemon closed the connection
    // Version 2.
    std::optional<protocol::AttachedReply> attached;
    std::optional<protocol::DetachedReply> detached;
    std::vector<protocol::DroppedNotice> dropped;
    std::optional<std::vector<protocol::SessionInfo>> sessions;
    std::optional<protocol::LogReply> log;  // READ: `output` holds its bytes
    std::optional<protocol::WaitReply> waited;
    std::optional<protocol::KillReply> killed;
    std::optional<protocol::SentReply> sent;
    // Version 3.
    std::optional<Screen> screen;
    // Version 4.
    std::optional<protocol::ExecReply> executed;
    std::optional<protocol::CommandListReply> command_list;
};

// Flushes and reads until the connection finishes (Closed or ProtocolViolation), gathering
// what arrives into `out`. False with `why` if that takes longer than `timeout`, or waiting
// or reading fails.
bool run_to_completion(Connection& connection, std::chrono::milliseconds timeout, Transcript& out, std::string& why);

}  // namespace ptyvisor::client
