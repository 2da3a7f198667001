// read_peer() and its pidfd_open fallback: the pidfd they return must be the connecting
// process's. Shown by what only a pidfd of that process can do: kill it, as waitpid sees.
#include "server/peer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "common/linux.h"

namespace ptyvisor::server {
namespace {

// A child connected to us over a Unix socket; it waits until it is killed.
class ConnectedChild {
public:
    ConnectedChild() {
        UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        const std::string name = "ptyvisor-peer-test-" + std::to_string(::getpid());
        std::memcpy(addr.sun_path + 1, name.data(), name.size());  // abstract: no file to clean
        const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
        if (!listener || ::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
            ::listen(listener.get(), 1) != 0)
            return;
        pid_ = ::fork();
        if (pid_ == 0) {
            const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
            if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) ::_exit(1);
            for (;;) ::pause();  // until SIGKILL
        }
        if (pid_ > 0) accepted_.reset(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    }
    ~ConnectedChild() {
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    [[nodiscard]] pid_t pid() const { return pid_; }
    [[nodiscard]] int socket() const { return accepted_.get(); }
    // How the child ended: the signal that killed it, or -1.
    int reap() {
        int status = 0;
        if (::waitpid(pid_, &status, 0) != pid_) return -1;
        reaped_ = true;
        return WIFSIGNALED(status) ? WTERMSIG(status) : -1;
    }

private:
    pid_t pid_ = -1;
    UniqueFd accepted_;
    bool reaped_ = false;
};

void expect_pidfd_is_the_peer(const PeerIdentity& id, ConnectedChild& child) {
    EXPECT_EQ(id.cred.pid, child.pid());
    ASSERT_TRUE(id.pidfd);
    EXPECT_EQ(pidfd_to_pid(id.pidfd.get()), child.pid());
    ASSERT_EQ(pidfd_send_signal(id.pidfd.get(), SIGKILL), 0) << std::strerror(errno);
    EXPECT_EQ(child.reap(), SIGKILL) << "the pidfd did not kill the peer";
}

bool kernel_has_so_peerpidfd(int socket) {
    int pidfd = -1;
    socklen_t len = sizeof pidfd;
    if (::getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) != 0) return false;
    ::close(pidfd);
    return true;
}

std::string kernel_release() {
    utsname u{};
    return ::uname(&u) == 0 ? u.release : "unknown";
}

TEST(ReadPeer, PidfdOpenFallbackGivesThePeersPidfd) {
    ConnectedChild child;
    ASSERT_GT(child.pid(), 0);
    ASSERT_GE(child.socket(), 0);
    PeerIdentity id;
    ASSERT_EQ(read_peer_by_pid(child.socket(), id), 0);
    expect_pidfd_is_the_peer(id, child);
}

TEST(ReadPeer, SoPeerPidfdGivesThePeersPidfd) {
    ConnectedChild child;
    ASSERT_GT(child.pid(), 0);
    ASSERT_GE(child.socket(), 0);
    if (!kernel_has_so_peerpidfd(child.socket()))
        GTEST_SKIP() << "SKIPPED, NOT TESTED: kernel " << kernel_release()
                     << " has no SO_PEERPIDFD (Linux 6.5+); read_peer() takes the pidfd_open "
                        "fallback here, which PidfdOpenFallbackGivesThePeersPidfd tests";
    PeerIdentity id;
    ASSERT_EQ(read_peer(child.socket(), id), 0);
    expect_pidfd_is_the_peer(id, child);
}

}  // namespace
}  // namespace ptyvisor::server
