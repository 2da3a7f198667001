// What the kernel says about a connecting client, read once at accept time.
#pragma once

#include <sys/socket.h>

#include <string>

#include "backends/backend.h"
#include "common/unique_fd.h"

namespace ptyvisor::server {

struct PeerIdentity {
    ucred cred{};
    UniqueFd pidfd;  // SO_PEERPIDFD, so a recycled PID can never pass for the peer

    [[nodiscard]] backends::Peer view() const {
        return {cred.pid, cred.uid, cred.gid, pidfd.get()};
    }
};

// SO_PEERCRED alone: enough to refuse a peer whose process holds all its handshakes
// (Admission::holds_all_its_handshakes) without pinning it. Returns 0 or a negative errno.
int read_peer_credentials(int socket, PeerIdentity& out);

// The pidfd of a peer whose credentials read_peer_credentials() has read: SO_PEERPIDFD,
// else read_peer_by_pid(). Returns 0 or a negative errno.
int read_peer_pidfd(int socket, PeerIdentity& out);

// Reads SO_PEERCRED and SO_PEERPIDFD. On kernels without SO_PEERPIDFD (before 6.5) falls
// back to read_peer_by_pid(). Returns 0 or a negative errno.
int read_peer(int socket, PeerIdentity& out);

// The fallback: SO_PEERCRED, then pidfd_open(pid). A peer that exits and whose PID is
// reused between connect() and this call would be mistaken for the newcomer; the window is
// narrow but open, which is why SO_PEERPIDFD comes first. Returns 0 or a negative errno.
int read_peer_by_pid(int socket, PeerIdentity& out);

}  // namespace ptyvisor::server
