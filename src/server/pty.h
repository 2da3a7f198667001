// A fresh PTY pair: the master stays in the daemon, the peer goes to the session.
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

// Opens a PTY owned by `uid`/`gid`, mode 0600 (readable and writable by the account alone,
// not by the rest of its group), sized `size`.
// Returns an errno on failure.
int open_pty(uid_t uid, gid_t gid, protocol::WindowSize size, PtyPair& out);

int set_window_size(int master, protocol::WindowSize size);

}  // namespace ptyvisor::server
