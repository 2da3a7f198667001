// What the daemon says, as Connection::read_events() reports it.
//
// On a session connection the events come in this order: Started (or Attached), any number of
// Output (and Dropped, for an observer that fell behind), then Exit or Detached; or Error at
// any point. On a request connection: its one reply (Status, Sessions, Waited, Killed, Sent;
// or Log followed by Output; Executed, CommandList), or Error. The stream of events ends with exactly one Closed (the daemon closed the connection) or ProtocolViolation (the
// daemon broke the protocol; the connection is unusable). Nothing follows either.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include <vector>

#include "protocol/command_payloads.h"
#include "protocol/screen_payloads.h"

#include "protocol/payloads.h"
#include "protocol/control_payloads.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::client {

// STARTED: the command runs in `unit` as `pid` (a PID in the daemon's namespace).
struct Started {
    std::string unit;
    std::int64_t pid = 0;
    std::string id;  // the session's id; empty from a daemon older than protocol version 2
    bool operator==(const Started&) const = default;
};

// Version 2 replies, as decoded (protocol/session_payloads.h).
struct Attached {
    protocol::AttachedReply reply;
    bool operator==(const Attached&) const = default;
};
struct Detached {
    protocol::DetachedReply reply;
    bool operator==(const Detached&) const = default;
};
struct Dropped {
    protocol::DroppedNotice notice;
    bool operator==(const Dropped&) const = default;
};
struct Sessions {
    std::vector<protocol::SessionInfo> sessions;
    std::string role;  // version 5: "agent", "observer", "supervisor" or "root"; else empty
    bool operator==(const Sessions&) const = default;
};
struct Log {
    protocol::LogReply reply;  // `reply.length` bytes follow as Output
    bool operator==(const Log&) const = default;
};
struct Waited {
    protocol::WaitReply reply;
    bool operator==(const Waited&) const = default;
};
struct Killed {
    protocol::KillReply reply;
    bool operator==(const Killed&) const = default;
};
struct Sent {
    protocol::SentReply reply;
    bool operator==(const Sent&) const = default;
};
// Version 3: SCREEN, the reply to SNAPSHOT; `json` is the payload as received.
struct Screen {
    protocol::ScreenReply screen;
    std::string json;
    bool operator==(const Screen&) const = default;
};

// Version 4: EXECUTED, the reply to EXEC, and COMMAND_LIST, the reply to COMMANDS.
struct Executed {
    protocol::ExecReply reply;
    bool operator==(const Executed&) const = default;
};
struct CommandList {
    protocol::CommandListReply reply;
    bool operator==(const CommandList&) const = default;
};

// Version 5: CONTROLLER (who holds the terminal now), REFUSED (an INPUT or RESIZE of this
// controller was not carried out: a person holds the terminal), CAST (the reply to
// RECORDING; `reply.length` bytes follow as Output).
struct ControllerChanged {
    protocol::ControllerNotice notice;
    bool operator==(const ControllerChanged&) const = default;
};
struct Refused {
    protocol::RefusedNotice notice;
    bool operator==(const Refused&) const = default;
};
struct Cast {
    protocol::CastReply reply;
    bool operator==(const Cast&) const = default;
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

using Event = std::variant<Started, Output, Exit, Error, Status, Closed, ProtocolViolation, Attached, Detached,
                           Dropped, Sessions, Log, Waited, Killed, Sent, Screen, Executed, CommandList,
                           ControllerChanged, Refused, Cast>;

// True for the events after which read_events() reports nothing more.
inline bool is_final(const Event& e) {
    return std::holds_alternative<Closed>(e) || std::holds_alternative<ProtocolViolation>(e);
}

}  // namespace ptyvisor::client
