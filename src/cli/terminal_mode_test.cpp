#include "cli/terminal_mode.h"

#include <pty.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <stdexcept>

#include "common/unique_fd.h"

namespace ptyvisor::cli {
namespace {

struct Pty {
    UniqueFd master, slave;
};

Pty open_pty() {
    int m = -1, s = -1;
    if (::openpty(&m, &s, nullptr, nullptr, nullptr) != 0) std::abort();
    return {UniqueFd(m), UniqueFd(s)};
}

termios attributes(int fd) {
    termios t{};
    EXPECT_EQ(::tcgetattr(fd, &t), 0);
    return t;
}

// RawMode::enter(), which must not fail.
std::optional<RawMode> enter(int fd) {
    std::optional<RawMode> raw;
    EXPECT_EQ(RawMode::enter(fd, raw), 0);
    return raw;
}

bool same(const termios& a, const termios& b) {
    return a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag &&
           a.c_lflag == b.c_lflag && a.c_cc[VMIN] == b.c_cc[VMIN] && a.c_cc[VTIME] == b.c_cc[VTIME];
}

TEST(RawMode, EntersRawAndRestoresOnDestruction) {
    const auto pty = open_pty();
    const termios before = attributes(pty.slave.get());
    ASSERT_TRUE(before.c_lflag & ICANON);
    {
        auto raw = enter(pty.slave.get());
        ASSERT_TRUE(raw.has_value());
        const termios during = attributes(pty.slave.get());
        EXPECT_FALSE(during.c_lflag & ICANON);
        EXPECT_FALSE(during.c_lflag & ECHO);
        EXPECT_FALSE(during.c_lflag & ISIG);
        EXPECT_FALSE(during.c_iflag & ICRNL);
        EXPECT_FALSE(during.c_iflag & IXON);
        EXPECT_EQ(during.c_cc[VMIN], 1);
        EXPECT_EQ(during.c_oflag, before.c_oflag) << "output processing is kept";
        EXPECT_TRUE(same(raw->saved(), before));
    }
    EXPECT_TRUE(same(attributes(pty.slave.get()), before));
}

TEST(RawMode, RestoresWhenAnExceptionUnwinds) {
    const auto pty = open_pty();
    const termios before = attributes(pty.slave.get());
    try {
        auto raw = enter(pty.slave.get());
        ASSERT_FALSE(attributes(pty.slave.get()).c_lflag & ICANON);
        throw std::runtime_error("boom");
    } catch (const std::runtime_error&) {
    }
    EXPECT_TRUE(same(attributes(pty.slave.get()), before));
}

TEST(RawMode, MovedFromRestoresOnce) {
    const auto pty = open_pty();
    const termios before = attributes(pty.slave.get());
    auto raw = enter(pty.slave.get());
    ASSERT_TRUE(raw);
    {
        RawMode moved(std::move(*raw));
        raw.reset();  // the moved-from object must not restore
        EXPECT_FALSE(attributes(pty.slave.get()).c_lflag & ICANON);
        moved.restore();
        EXPECT_TRUE(same(attributes(pty.slave.get()), before));
        // Changed by someone else after restore(): the destructor must leave it alone.
        termios other = before;
        other.c_lflag &= ~static_cast<tcflag_t>(ECHO);
        ASSERT_EQ(::tcsetattr(pty.slave.get(), TCSANOW, &other), 0);
    }
    EXPECT_FALSE(attributes(pty.slave.get()).c_lflag & ECHO);
}

TEST(RawMode, NotATerminalIsNotAnError) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    UniqueFd r(p[0]), w(p[1]);
    EXPECT_FALSE(enter(r.get()).has_value());
}

}  // namespace
}  // namespace ptyvisor::cli
