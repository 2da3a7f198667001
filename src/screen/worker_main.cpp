// ptyvisor-screen: the screen worker. Started by ptyvisord (screen_broker.h) with its end
// of a socketpair as descriptor 3; confines itself (sandbox.h), then serves messages
// (worker_protocol.h) until the daemon closes the socket. It holds nothing the daemon
// cannot rebuild: killing it at any moment loses no session and no byte.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "protocol/fd_passing.h"
#include "screen/sandbox.h"
#include "screen/worker.h"

namespace {

constexpr int kSocket = 3;

bool write_all(const std::vector<std::uint8_t>& bytes) {
    std::size_t at = 0;
    while (at < bytes.size()) {
        const ssize_t n = ::send(kSocket, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        at += static_cast<std::size_t>(n);
    }
    return true;
}

int serve() {
    using namespace ptyvisor;
    bool broken = false;
    screen::Worker worker([&](std::vector<std::uint8_t> message) {
        if (!write_all(message)) broken = true;
    });
    std::vector<std::uint8_t> buffer(64 * 1024), pending;
    std::vector<UniqueFd> fds;
    while (!broken) {
        // receive_with_fds does not block: wait here for the daemon's next message.
        pollfd in{kSocket, POLLIN, 0};
        if (::poll(&in, 1, -1) < 0 && errno != EINTR) return 1;
        auto got = protocol::receive_with_fds(kSocket, buffer);
        if (got.error == -EINTR || got.error == -EAGAIN) continue;
        if (got.error || got.eof || got.control_truncated) return got.eof ? 0 : 1;
        for (auto& fd : got.fds) fds.push_back(std::move(fd));
        pending.insert(pending.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(got.bytes));
        const auto used = screen::split_messages(pending, screen::kMaxDaemonMessage,
                                                 [&](screen::MessageType type, std::span<const std::uint8_t> body) {
                                                     return worker.handle(type, body, fds);
                                                 });
        if (!used) return 2;
        pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(*used));
        if (fds.size() > 64) return 2;  // descriptors nobody claimed
    }
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    // --uid N: the identity of its own the daemon picked (server/screen_identity.h);
    // --user ACCOUNT: one an administrator chose.
    std::string why;
    bool confined = false;
    if (argc == 3 && std::strcmp(argv[1], "--user") == 0) {
        confined = ptyvisor::screen::enter_sandbox(argv[2], why);
    } else if (argc == 3 && std::strcmp(argv[1], "--uid") == 0) {
        char* end = nullptr;
        errno = 0;
        const unsigned long id = std::strtoul(argv[2], &end, 10);
        if (errno != 0 || end == argv[2] || *end != '\0' || id == 0 || id >= 0xffffffffUL) {
            std::fprintf(stderr, "ptyvisor-screen: --uid wants a number other than 0\n");
            return 2;
        }
        confined = ptyvisor::screen::enter_sandbox(static_cast<uid_t>(id), static_cast<gid_t>(id), why);
    } else {
        std::fprintf(stderr, "usage: ptyvisor-screen --uid N | --user ACCOUNT (started by ptyvisord)\n");
        return 2;
    }
    if (!confined) {
        std::fprintf(stderr, "ptyvisor-screen: cannot confine itself: %s\n", why.c_str());
        return 1;
    }
    return serve();
}
