// ClientError: a failure the client library cannot recover from on its own (cannot connect,
// bad start options, a socket error). The message is complete and meant for a human, e.g.
// "cannot connect to /run/ptyvisor/ptyvisor.sock: Permission denied".
//
// Things the daemon says (ERROR, EXIT) and a misbehaving daemon (ProtocolViolation) are not
// exceptions: they arrive as events from Connection::read_events().
#pragma once

#include <stdexcept>
#include <string>

namespace ptyvisor::client {

class ClientError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// "<what>: <strerror(error)>".
ClientError system_error(const std::string& what, int error);

}  // namespace ptyvisor::client
