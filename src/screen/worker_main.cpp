// ptyvisor-screen: the screen worker. Started by ptyvisord (screen_broker.h) with its end
// of a socketpair as descriptor 3; confines itself (sandbox.h), then serves messages
// (worker_protocol.h) until the daemon closes the socket. It holds nothing the daemon
// cannot rebuild: killing it at any moment loses no session and no byte.
#include <malloc.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
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
    // Quiet sessions' emulators are given back (worker.h) by a sweep every quarter of the
    // quiet period, which runs only while one may be given back: a worker whose sessions are
    // all idle, or hold emulators that must stay, sleeps in poll() with no timeout, as before.
    constexpr auto kSweep = screen::Worker::kQuietPeriod / 4;
    auto next_sweep = screen::Worker::Clock::now() + kSweep;
    while (!broken) {
        int timeout = -1;
        if (worker.sweep_due()) {
            const auto now = screen::Worker::Clock::now();
            if (now >= next_sweep) {
                // Freed cells go back to the kernel: without the trim they stay in the heap.
                if (worker.evict_quiet(now) > 0) ::malloc_trim(0);
                next_sweep = now + kSweep;
            }
            timeout = static_cast<int>(
                std::chrono::ceil<std::chrono::milliseconds>(next_sweep - screen::Worker::Clock::now()).count());
            timeout = std::max(timeout, 0);
        } else {
            next_sweep = screen::Worker::Clock::now() + kSweep;  // the first sweep a period after use
        }
        // receive_with_fds does not block: wait here for the daemon's next message.
        pollfd in{kSocket, POLLIN, 0};
        const int ready = ::poll(&in, 1, timeout);
        if (ready < 0 && errno != EINTR) return 1;
        if (ready <= 0) continue;
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
