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

// How many connections the kernel queues for accept(). Not SOMAXCONN (4096): the queue is
// first in, first out and the daemon learns who a connection is only once it accepts it, so
// an agent that connects behind a full queue waits for every connection ahead of it to be
// accepted and refused, at tens of microseconds each (docs/admission.md, "The listen
// queue"). A same-uid flood kept 2,000 connections queued, and the agent's START waited
// 140-200 ms behind them. With 64 the wait is bounded by one accept batch
// (Server::on_accept); a flooder that finds the queue full gets EAGAIN and holds nothing,
// and a blocking connect() (the CLI's, the C++ and Python clients') sleeps until accept()
// makes room. Non-blocking connects (Node, Go) get EAGAIN too, as they did from a flood
// that filled 4096.
inline constexpr int kListenBacklog = 64;

// The listening socket, non-blocking and close-on-exec, in `out`: the one systemd passed
// (LISTEN_FDS), else our own at `path`. False with `why` (docs/architecture.md, "Error
// conventions").
bool open_listener(const std::string& path, gid_t group, UniqueFd& out, std::string& why);

}  // namespace ptyvisor::server
