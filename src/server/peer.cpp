#include "server/peer.h"

#include <cerrno>

#include "common/linux.h"

namespace ptyvisor::server {
namespace {

int read_peer_cred(int socket, PeerIdentity& out) {
    socklen_t len = sizeof out.cred;
    return ::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &out.cred, &len) < 0 ? -errno : 0;
}

}  // namespace

int read_peer_credentials(int socket, PeerIdentity& out) { return read_peer_cred(socket, out); }

int read_peer(int socket, PeerIdentity& out) {
    if (const int r = read_peer_cred(socket, out); r < 0) return r;
    return read_peer_pidfd(socket, out);
}

int read_peer_pidfd(int socket, PeerIdentity& out) {
    int pidfd = -1;
    socklen_t len = sizeof pidfd;
    if (::getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0) {
        out.pidfd.reset(pidfd);
        return 0;
    }
    return read_peer_by_pid(socket, out);
}

int read_peer_by_pid(int socket, PeerIdentity& out) {
    if (const int r = read_peer_cred(socket, out); r < 0) return r;
    out.pidfd.reset(pidfd_open(out.cred.pid));
    if (!out.pidfd) return -errno;
    return 0;
}

}  // namespace ptyvisor::server
