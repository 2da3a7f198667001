// The listening socket: socket activation when systemd hands us one, else our own.
//
// Our own socket: an existing non-socket at the path is refused, a stale socket is replaced,
// and the socket is mode 0660 with the account's group so only root and the account can
// connect. Everything after the parent directory is looked up once, by path, is done through
// a handle on that directory; and that directory must be root's and writable by root alone
// (created 0755 when missing). Otherwise whoever could write it could swap the socket for a
// symlink between bind() and chown(), and have root hand any file to the account's group.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/unique_fd.h"

namespace ptyvisor::server {

// The listening socket, non-blocking and close-on-exec, in `out`: the one systemd passed
// (LISTEN_FDS), else our own at `path`. False with `why` (docs/architecture.md, "Error
// conventions").
bool open_listener(const std::string& path, gid_t group, UniqueFd& out, std::string& why);

}  // namespace ptyvisor::server
