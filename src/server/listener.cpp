#include "server/listener.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ptyvisor::server {
namespace {

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

ListenerResult open_listener(const std::string& path, gid_t group) {
    ListenerResult out;
    const int n = sd_listen_fds(/*unset_environment=*/1);
    if (n > 1) {
        out.error = "socket activation passed " + std::to_string(n) + " sockets; expected one";
        for (int i = 0; i < n; ++i) ::close(SD_LISTEN_FDS_START + i);
        return out;
    }
    if (n == 1) {
        UniqueFd fd(SD_LISTEN_FDS_START);
        if (sd_is_socket_unix(fd.get(), SOCK_STREAM, 1, nullptr, 0) <= 0) {
            out.error = "the activated socket is not a listening Unix stream socket";
            return out;
        }
        ::fcntl(fd.get(), F_SETFD, FD_CLOEXEC);
        ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
        out.fd = std::move(fd);
        out.activated = true;
        return out;
    }

    const auto slash = path.rfind('/');
    if (slash != std::string::npos && slash > 0) {
        const std::string dir = path.substr(0, slash);
        if (::mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) {
            out.error = errno_text("mkdir " + dir);
            return out;
        }
    }
    struct stat st{};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            out.error = path + " exists and is not a socket; refusing to replace it";
            return out;
        }
        if (::unlink(path.c_str()) < 0) {
            out.error = errno_text("unlink stale socket " + path);
            return out;
        }
    }
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) {
        out.error = errno_text("socket");
        return out;
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
        out.error = "socket path too long: " + path;
        return out;
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    // Bind under a tight umask, so there is no moment at which others may connect.
    const mode_t old = ::umask(0177);
    const int r = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    ::umask(old);
    if (r < 0) {
        out.error = errno_text("bind " + path);
        return out;
    }
    if (::chown(path.c_str(), 0, group) < 0 || ::chmod(path.c_str(), 0660) < 0) {
        out.error = errno_text("set owner and mode of " + path);
        return out;
    }
    if (::listen(fd.get(), SOMAXCONN) < 0) {
        out.error = errno_text("listen");
        return out;
    }
    out.fd = std::move(fd);
    return out;
}

}  // namespace ptyvisor::server
