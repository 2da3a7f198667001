#include "server/listener.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace ptyvisor::server {
namespace {

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string proc_fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// The directory that will hold the socket, created 0755 if missing, as a handle. Refused
// unless it is a real directory (not a symlink), root's, and not writable by group or
// others: anyone else who can write it can replace our socket's name at will.
UniqueFd open_socket_directory(const std::string& dir, std::string& error) {
    bool created = false;
    if (::mkdir(dir.c_str(), 0755) == 0) created = true;
    else if (errno != EEXIST) {
        error = errno_text("mkdir " + dir);
        return {};
    }
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) {
        if (errno == ENOTDIR || errno == ELOOP)
            error = "socket directory " + dir + " is a symlink or not a directory; refusing it";
        else
            error = errno_text("open socket directory " + dir);
        return {};
    }
    // Our umask (0077 under the unit) would leave a new directory unreachable for the account.
    if (created && ::fchmod(fd.get(), 0755) < 0) {
        error = errno_text("chmod 0755 " + dir);
        return {};
    }
    struct stat st{};
    if (::fstat(fd.get(), &st) < 0) {
        error = errno_text("stat " + dir);
        return {};
    }
    if (st.st_uid != 0) {
        error = "socket directory " + dir + " is owned by uid " + std::to_string(st.st_uid) +
                ", not root; refusing it (use a directory only root can write, such as /run/ptyvisor)";
        return {};
    }
    // Sticky or not: a group- or world-writable directory is refused outright. Sticky would
    // stop others from renaming our entry, not from planting one before we bind.
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        error = "socket directory " + dir + " is writable by group or others (mode " + mode +
                "); refusing it (use a directory only root can write, such as /run/ptyvisor)";
        return {};
    }
    return fd;
}

// Removes a socket left by an earlier run; refuses anything else at the name.
bool remove_stale_socket(int dir, const std::string& name, const std::string& path, std::string& error) {
    struct stat st{};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT) return true;
        error = errno_text("stat " + path);
        return false;
    }
    if (!S_ISSOCK(st.st_mode)) {
        error = path + " exists and is not a socket; refusing to replace it";
        return false;
    }
    if (::unlinkat(dir, name.c_str(), 0) < 0) {
        error = errno_text("unlink stale socket " + path);
        return false;
    }
    return true;
}

// Whether `node` (an O_PATH handle) is where `listener` is bound: connect through the handle
// and see our own connection arrive. fstat of a socket describes sockfs, not the node, and
// sock_diag (which knows the node) needs AF_NETLINK, which the unit does not allow.
bool node_is_bound_to(int node, int listener) {
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const std::string via = proc_fd_path(node);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, via.c_str(), via.size() + 1);
    if (!probe || ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) < 0)
        return false;
    // A Unix connect completes at once, so the non-blocking accept has it now or never.
    UniqueFd accepted(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    ucred cred{};
    socklen_t len = sizeof cred;
    return accepted && ::getsockopt(accepted.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
           cred.pid == ::getpid();
}

// Gives the socket node root:group 0660 through a handle on the node itself, once the node
// is shown to be the one `listener` is bound to. Until then it is 0600 root's (the umask at
// bind), so no one else can connect, or be the connection we look for.
bool set_socket_owner_and_mode(int dir, const std::string& name, const std::string& path,
                               int listener, gid_t group, std::string& error) {
    UniqueFd node(::openat(dir, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!node) {
        error = errno_text("open the socket node " + path);
        return false;
    }
    struct stat st{};
    if (::fstat(node.get(), &st) < 0) {
        error = errno_text("stat " + path);
        return false;
    }
    if (!S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid() || st.st_nlink != 1 ||
        !node_is_bound_to(node.get(), listener)) {
        error = path + " is not the socket just bound; refusing it";
        return false;
    }
    // Owner first, then mode: the group can connect only once it is the account's group.
    if (::fchownat(node.get(), "", 0, group, AT_EMPTY_PATH) < 0) {
        error = errno_text("set owner of " + path);
        return false;
    }
    // No fchmod on an O_PATH handle, and fchmodat(AT_EMPTY_PATH) needs fchmodat2 (Linux 6.6,
    // glibc 2.39); the handle's /proc/self/fd link reaches the same inode without a lookup
    // in any directory.
    if (::chmod(proc_fd_path(node.get()).c_str(), 0660) < 0) {
        error = errno_text("set mode of " + path);
        return false;
    }
    return true;
}

}  // namespace

namespace {

// The socket systemd passed: exactly one, a listening Unix stream socket, which we make
// close-on-exec and non-blocking (a blocking one would stall the loop in accept).
bool adopt_activated_socket(int count, UniqueFd& out, std::string& why) {
    std::vector<UniqueFd> passed;
    for (int i = 0; i < count; ++i) passed.emplace_back(SD_LISTEN_FDS_START + i);
    if (count != 1) {
        why = "socket activation passed " + std::to_string(count) + " sockets; expected one";
        return false;
    }
    UniqueFd fd = std::move(passed.front());
    if (sd_is_socket_unix(fd.get(), SOCK_STREAM, 1, nullptr, 0) <= 0) {
        why = "the activated socket is not a listening Unix stream socket";
        return false;
    }
    const int flags = ::fcntl(fd.get(), F_GETFL);
    if (::fcntl(fd.get(), F_SETFD, FD_CLOEXEC) < 0 || flags < 0 ||
        ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) < 0) {
        why = errno_text("make the activated socket close-on-exec and non-blocking");
        return false;
    }
    out = std::move(fd);
    return true;
}

// Our own socket at `path` (see listener.h for what is refused, and why).
bool bind_own_socket(const std::string& path, gid_t group, UniqueFd& out, std::string& why) {
    const auto slash = path.rfind('/');
    const std::string dir_path = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (name.empty() || name == "." || name == "..") {
        why = "socket path does not name a file: " + path;
        return false;
    }
    const UniqueFd dir = open_socket_directory(dir_path, why);
    if (!dir) return false;
    if (!remove_stale_socket(dir.get(), name, path, why)) return false;

    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) {
        why = errno_text("socket");
        return false;
    }
    // Bind through the directory handle, not the path: the name is created in the directory
    // we checked, whatever has happened to the path since.
    const std::string bind_path = proc_fd_path(dir.get()) + "/" + name;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path || bind_path.size() >= sizeof addr.sun_path) {
        why = "socket path too long: " + path;
        return false;
    }
    std::memcpy(addr.sun_path, bind_path.c_str(), bind_path.size() + 1);
    // Bind under a tight umask, so there is no moment at which others may connect.
    const mode_t old = ::umask(0177);
    const int r = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    ::umask(old);
    if (r < 0) {
        why = errno_text("bind " + path);
        return false;
    }
    // SOMAXCONN, on purpose. A short queue (64 was tried, aeb0f30) does not let the agent
    // in sooner: flooders that find it full retry at once and refill it as accept() empties
    // it, and the agent's connect, woken in the kernel, must win that race; with 64 flooding
    // processes under allow_units it lost it for seconds (docs/admission.md, "The listen
    // queue"). The agent's wait behind a long queue is kept short by making each refusal
    // cheap instead (Server::accept_one).
    if (::listen(fd.get(), SOMAXCONN) < 0) {
        why = errno_text("listen");
        return false;
    }
    if (!set_socket_owner_and_mode(dir.get(), name, path, fd.get(), group, why)) return false;
    out = std::move(fd);
    return true;
}

}  // namespace

bool open_listener(const std::string& path, gid_t group, UniqueFd& out, std::string& why) {
    const int n = sd_listen_fds(/*unset_environment=*/1);
    if (n < 0) {
        why = std::string("cannot read LISTEN_FDS: ") + std::strerror(-n);
        return false;
    }
    if (n > 0) return adopt_activated_socket(n, out, why);
    return bind_own_socket(path, group, out, why);
}

}  // namespace ptyvisor::server
