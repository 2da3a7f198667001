#include "server/peer.h"

#include <cerrno>

#include "common/linux.h"

namespace ptyvisor::server {

int read_peer(int socket, PeerIdentity& out) {
    socklen_t len = sizeof out.cred;
    if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &out.cred, &len) < 0) return errno;
    int pidfd = -1;
    len = sizeof pidfd;
    if (::getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0) {
        out.pidfd.reset(pidfd);
        return 0;
    }
    out.pidfd.reset(pidfd_open(out.cred.pid));
    if (!out.pidfd) return errno;
    return 0;
}

}  // namespace ptyvisor::server
