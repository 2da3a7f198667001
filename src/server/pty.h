// A fresh PTY pair: the master stays in the daemon, the peer goes to the session.
//
// Errors follow docs/architecture.md, "Error conventions": 0 or a negative errno.
#pragma once

#include <string>

#include "common/unique_fd.h"
#include "protocol/payloads.h"

namespace ptyvisor::server {

struct PtyPair {
    UniqueFd master;  // non-blocking, close-on-exec
    UniqueFd peer;    // close-on-exec, not our controlling terminal
    std::string peer_path;
};

// Opens a PTY owned by `uid` and `group` (the "tty" group: see terminal_group()), mode 0600
// (readable and writable by the account alone), sized `size`. Returns 0, or a negative
// errno with `out` untouched.
int open_pty(uid_t uid, gid_t group, protocol::WindowSize size, PtyPair& out);

// The group of session terminals: "tty", as login uses; `fallback` where there is none.
gid_t terminal_group(gid_t fallback);

// Sets the terminal's size through its master. Returns 0 or a negative errno.
int set_window_size(int master, protocol::WindowSize size);

}  // namespace ptyvisor::server
