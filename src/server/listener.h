// The listening socket: socket activation when systemd hands us one, else our own.
//
// Our own socket follows the pilot: an existing non-socket at the path is refused, a stale
// socket is replaced, the parent directory is created 0755, and the socket is mode 0660
// with the account's group so only root and the account can connect.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/unique_fd.h"

namespace ptyvisor::server {

struct ListenerResult {
    UniqueFd fd;
    bool activated = false;  // came from LISTEN_FDS
    std::string error;
};

ListenerResult open_listener(const std::string& path, gid_t group);

}  // namespace ptyvisor::server
