#include "cli/terminal_mode.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace ptyvisor::cli {

termios raw_attributes(const termios& current) {
    termios raw = current;
    ::cfmakeraw(&raw);
    raw.c_oflag = current.c_oflag;
    return raw;
}

int RawMode::enter(int fd, std::optional<RawMode>& out) {
    termios saved{};
    if (!::isatty(fd) || ::tcgetattr(fd, &saved) < 0) return 0;
    const termios raw = raw_attributes(saved);
    while (::tcsetattr(fd, TCSANOW, &raw) < 0)
        if (errno != EINTR) return -errno;
    out.reset();
    out.emplace(RawMode(fd, saved));
    return 0;
}

RawMode::RawMode(RawMode&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), saved_(other.saved_) {}

RawMode::~RawMode() { restore(); }

void RawMode::restore() noexcept {
    if (fd_ < 0) return;
    // TCSANOW, not TCSADRAIN: a terminal that stopped draining must not hang the exit.
    while (::tcsetattr(fd_, TCSANOW, &saved_) < 0 && errno == EINTR) {
    }
    fd_ = -1;
}

}  // namespace ptyvisor::cli
