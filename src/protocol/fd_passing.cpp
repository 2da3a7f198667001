#include "protocol/fd_passing.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/linux.h"

namespace ptyvisor::protocol {
namespace {

// SCM_PIDFD (Linux 6.5), which Debian 12's headers do not define.
constexpr int kScmPidfd = 0x04;

// send_once() with the RLIMIT_NOFILE soft limit at the hard limit for the call (see
// send_with_fd). The limit is put back at once: the caller's process keeps its own.
long send_once_with_raised_nofile(int socket, std::span<const std::uint8_t> bytes, int fd) {
    rlimit saved{};
    if (::getrlimit(RLIMIT_NOFILE, &saved) != 0 || saved.rlim_cur == saved.rlim_max) return -ETOOMANYREFS;
    rlimit raised = saved;
    raised.rlim_cur = saved.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) return -ETOOMANYREFS;
    const long n = send_once(socket, bytes, fd);
    ::setrlimit(RLIMIT_NOFILE, &saved);
    return n;
}

}  // namespace

Received receive_with_fds(int socket, std::span<std::uint8_t> buffer) {
    Received r;
    iovec iov{buffer.data(), buffer.size()};
    // Room for the largest SCM_RIGHTS message the kernel will build, plus one credentials
    // message in case the socket has SO_PASSCRED set, plus one SCM_PIDFD in case it has
    // SO_PASSPIDFD set.
    alignas(cmsghdr) std::uint8_t control[CMSG_SPACE(sizeof(int) * SCM_MAX_FD) +
                                          CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;

    ssize_t n;
    do {
        n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        r.error = -errno;
        return r;
    }
    // Take ownership of every installed descriptor before judging anything else. A pidfd
    // that the kernel adds on its own (SO_PASSPIDFD) is not one the peer sent: it is closed
    // here rather than leaked.
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET) continue;
        if (c->cmsg_type != SCM_RIGHTS && c->cmsg_type != kScmPidfd) continue;
        if (c->cmsg_len < CMSG_LEN(0)) continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (fd < 0) continue;
            if (c->cmsg_type == SCM_RIGHTS)
                r.fds.emplace_back(fd);
            else
                ::close(fd);
        }
    }
    r.control_truncated = (msg.msg_flags & MSG_CTRUNC) != 0;
    r.bytes = static_cast<std::size_t>(n);
    r.eof = n == 0;
    return r;
}

long send_once(int socket, std::span<const std::uint8_t> bytes, int fd, int flags) {
    iovec iov{const_cast<std::uint8_t*>(bytes.data()), bytes.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) std::uint8_t control[CMSG_SPACE(sizeof(int))];
    if (fd >= 0) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL | flags);
    return n < 0 ? -errno : n;
}

int send_with_fd(int socket, std::span<const std::uint8_t> bytes, int fd) {
    std::size_t sent = 0;
    bool fd_sent = fd < 0;
    while (sent < bytes.size()) {
        long n = send_once(socket, bytes.subspan(sent), fd_sent ? -1 : fd);
        if (n == -ETOOMANYREFS && !fd_sent) n = send_once_with_raised_nofile(socket, bytes.subspan(sent), fd);
        if (n == -EINTR) continue;
        if (n < 0) return static_cast<int>(n);
        fd_sent = true;
        sent += static_cast<std::size_t>(n);
    }
    return 0;
}

}  // namespace ptyvisor::protocol
