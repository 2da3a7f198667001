#include "server/pty.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

namespace ptyvisor::server {

int open_pty(uid_t uid, gid_t gid, protocol::WindowSize size, PtyPair& out) {
    UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
    if (!master || ::unlockpt(master.get()) < 0) return errno;
    // TIOCGPTPEER opens the peer through the master, immune to /dev/pts path games.
    UniqueFd peer(::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!peer) return errno;
    char name[64];
    if (::ptsname_r(master.get(), name, sizeof name) != 0) return errno;
    // The account must own its terminal (as after login), or tools like `tty` and `mesg` fail.
    // Mode 0600, not a login's 0620: login gives the group bit to "tty" (for write/wall),
    // here the group is the agent's own primary group, whose other members could then type
    // into the agent's view. Agent terminals have no use for write(1) or wall(1).
    if (::fchown(peer.get(), uid, gid) < 0 || ::fchmod(peer.get(), 0600) < 0) return errno;
    if (const int e = set_window_size(master.get(), size); e != 0) return e;
    out.master = std::move(master);
    out.peer = std::move(peer);
    out.peer_path = name;
    return 0;
}

int set_window_size(int master, protocol::WindowSize size) {
    winsize ws{};
    ws.ws_row = size.rows;
    ws.ws_col = size.cols;
    return ::ioctl(master, TIOCSWINSZ, &ws) < 0 ? errno : 0;
}

}  // namespace ptyvisor::server
