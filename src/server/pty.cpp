#include "server/pty.h"

#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace ptyvisor::server {

int open_pty(uid_t uid, gid_t group, protocol::WindowSize size, PtyPair& out) {
    UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
    if (!master || ::unlockpt(master.get()) < 0) return -errno;
    // TIOCGPTPEER opens the peer through the master, immune to /dev/pts path games.
    UniqueFd peer(::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!peer) return -errno;
    char name[64];
    // ptsname_r returns its error number rather than -1.
    if (const int e = ::ptsname_r(master.get(), name, sizeof name); e != 0) return -e;
    // The account must own its terminal (as after login), or tools like `tty` and `mesg` fail.
    // The group is "tty", as login makes it, never the agent's primary group, whose other
    // members could then type into the agent's view. Mode 0600: agent terminals have no use
    // for write(1) or wall(1). (systemd, starting a unit on it, sets login's 0620; with the
    // group "tty" that is what login gives, and only setgid-tty programs may use it.)
    if (::fchown(peer.get(), uid, group) < 0 || ::fchmod(peer.get(), 0600) < 0) return -errno;
    if (const int r = set_window_size(master.get(), size); r < 0) return r;
    out.master = std::move(master);
    out.peer = std::move(peer);
    out.peer_path = name;
    return 0;
}

gid_t terminal_group(gid_t fallback) {
    std::vector<char> buffer(4096);
    group entry{};
    group* found = nullptr;
    if (::getgrnam_r("tty", &entry, buffer.data(), buffer.size(), &found) == 0 && found) return found->gr_gid;
    return fallback;
}

int set_window_size(int master, protocol::WindowSize size) {
    winsize ws{};
    ws.ws_row = size.rows;
    ws.ws_col = size.cols;
    return ::ioctl(master, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

}  // namespace ptyvisor::server
