// How the client library reports failure (docs/architecture.md, "Error conventions"): a call
// that can fail returns false and fills `std::string& why` with a complete message for a
// person, e.g. "cannot connect to /run/ptyvisor/ptyvisor.sock: Permission denied".
//
// Things the daemon says (ERROR, EXIT) and a misbehaving daemon (ProtocolViolation) are not
// failures of a call: they arrive as events from Connection::read_events(). A call out of
// order (INPUT before START, a second START) or with a value no daemon could accept (signal
// 0) is the caller's bug, not a failure: it throws std::logic_error.
#pragma once

#include <string>

namespace ptyvisor::client {

// "<what>: <strerror(error)>", for a positive or negative errno.
std::string errno_message(const std::string& what, int error);

}  // namespace ptyvisor::client
