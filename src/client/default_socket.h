// Where the daemon listens unless told otherwise. The client and the daemon both include
// this, so the two defaults cannot drift apart.
#pragma once

namespace ptyvisor::client {

inline constexpr const char* kDefaultSocketPath = "/run/ptyvisor/ptyvisor.sock";

// The environment variable that overrides kDefaultSocketPath for the client.
inline constexpr const char* kSocketEnvironmentVariable = "PTYVISOR_SOCKET";

}  // namespace ptyvisor::client
