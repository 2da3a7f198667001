// What the daemon says, as Connection::read_events() reports it.
//
// On a session connection the events come in this order: Started, any number of Output, then
// Exit; or Error at any point. On a status connection: Status, or Error. The stream of events
// ends with exactly one Closed (the daemon closed the connection) or ProtocolViolation (the
// daemon broke the protocol; the connection is unusable). Nothing follows either.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "protocol/payloads.h"

namespace ptyvisor::client {

// STARTED: the command runs in `unit` as `pid` (a PID in the daemon's namespace).
struct Started {
    std::string unit;
    std::int64_t pid = 0;
    bool operator==(const Started&) const = default;
};

// OUTPUT: bytes the command wrote to its terminal, in order.
struct Output {
    std::vector<std::uint8_t> bytes;
    bool operator==(const Output&) const = default;
};

// EXIT: the session is over; every Output came before this.
struct Exit {
    protocol::ExitStatus status;
    bool operator==(const Exit&) const = default;
};

// ERROR: the daemon refused or failed the request; the connection closes after it.
struct Error {
    protocol::ErrorReply reply;
    bool operator==(const Error&) const = default;
};

// STATUS: the daemon's report, decoded, and its JSON verbatim (members a newer daemon added
// are only in the latter).
struct Status {
    protocol::StatusReply reply;
    std::string json;
    bool operator==(const Status&) const = default;
};

// End of stream from the daemon.
struct Closed {
    bool operator==(const Closed&) const = default;
};

// The daemon sent something the protocol does not allow.
struct ProtocolViolation {
    std::string message;
    bool operator==(const ProtocolViolation&) const = default;
};

using Event = std::variant<Started, Output, Exit, Error, Status, Closed, ProtocolViolation>;

// True for the events after which read_events() reports nothing more.
inline bool is_final(const Event& e) {
    return std::holds_alternative<Closed>(e) || std::holds_alternative<ProtocolViolation>(e);
}

}  // namespace ptyvisor::client
