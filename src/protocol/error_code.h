// Stable error codes carried by ERROR frames. The names are part of the protocol: never
// rename one, only add. Their names on the wire, and the order of the enumerators, are those
// of protocol/protocol.json (checked at compile time by frame.cpp).
#pragma once

#include <optional>
#include <string_view>

namespace ptyvisor::protocol {

enum class ErrorCode {
    BadFrame,            // malformed header or payload
    UnsupportedVersion,  // header version is not kVersion
    TooBig,              // declared length over the type's bound
    UnexpectedFrame,     // a valid frame that is not allowed in this state
    WrongFdCount,        // START without exactly one fd, or an fd on another frame
    NotADirectory,       // the START fd is not a directory
    CwdMismatch,         // st_dev/st_ino of the fd differ from START
    NotAllowed,          // peer failed authentication
    Busy,                // no session slot free
    RateLimited,         // admission rate exceeded
    Overloaded,          // too many unauthenticated connections
    HandshakeTimeout,    // START did not arrive in time
    StartFailed,         // the backend could not start the command
    Internal,            // daemon-side failure
    ShuttingDown,        // the daemon is stopping
    // Version 2.
    NoSuchSession,       // no session has that id (or it has gone)
    SessionEnded,        // the session has exited: it takes no input or signal
    // Version 4.
    NoShellIntegration,  // the session's shell reports no commands (no OSC 133 marks)
    // Version 5.
    HeldBySupervisor,    // a person holds the terminal: the agent's input waits
    // Version 6.
    ProfileNotAllowed,   // START named a profile the agent may not choose
    ProfileUnavailable,  // this host cannot enforce the session's profile
};

std::string_view to_string(ErrorCode code);
std::optional<ErrorCode> error_code_from_string(std::string_view name);

}  // namespace ptyvisor::protocol
