// Hostile descriptor passing over a real AF_UNIX stream socketpair (flaw 2 of the pilot).
//
// A sender attaches 0..253 descriptors of every kind to frames, to the wrong frames, to a frame
// it then abandons, and spreads them over several messages. Each test counts the entries of
// /proc/self/fd: the received descriptors must all be installed, owned, usable and
// close-on-exec, and the count must return to where it was once they go out of scope.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "common/linux.h"
#include "common/testing/as_nobody.h"
#include "common/unique_fd.h"
#include "protocol/fd_passing.h"
#include "protocol/frame.h"
#include "protocol/frame_decoder.h"
#include "protocol/payloads.h"

#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif

namespace ptyvisor::protocol {
namespace {

std::string kernel_release() {
    utsname u{};
    return ::uname(&u) == 0 ? u.release : "unknown";
}

using Bytes = std::vector<std::uint8_t>;

// Open descriptors of this process, not counting the one used to list them.
int open_fd_count() {
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) return -1;
    int n = 0;
    while (const dirent* e = ::readdir(dir))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++n;
    ::closedir(dir);
    return n - 1;
}

struct SocketPair {
    UniqueFd sender;
    UniqueFd receiver;
};

SocketPair socket_pair() {
    int sv[2] = {-1, -1};
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0) << std::strerror(errno);
    return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

// What a descriptor refers to, to check that the received one is the sent one.
struct Identity {
    dev_t dev;
    ino_t ino;
    mode_t type;
    bool operator==(const Identity&) const = default;
};

Identity identity(int fd) {
    struct stat st {};
    EXPECT_EQ(::fstat(fd, &st), 0) << std::strerror(errno);
    return {st.st_dev, st.st_ino, st.st_mode & S_IFMT};
}

// `n` descriptors of mixed kinds: /dev/null, dups of it, both ends of pipes, directories and
// sockets.
std::vector<UniqueFd> make_fds(std::size_t n) {
    std::vector<UniqueFd> fds;
    while (fds.size() < n) {
        switch (fds.size() % 5) {
            case 0: fds.emplace_back(::open("/dev/null", O_RDWR | O_CLOEXEC)); break;
            case 1: fds.emplace_back(::fcntl(fds.front().get(), F_DUPFD_CLOEXEC, 0)); break;
            case 2: {
                int p[2];
                EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
                fds.emplace_back(p[0]);
                if (fds.size() < n)
                    fds.emplace_back(p[1]);
                else
                    ::close(p[1]);
                break;
            }
            case 3: fds.emplace_back(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)); break;
            default: fds.emplace_back(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)); break;
        }
        EXPECT_TRUE(fds.back().valid()) << std::strerror(errno);
    }
    return fds;
}

std::vector<Identity> identities(const std::vector<UniqueFd>& fds) {
    std::vector<Identity> ids;
    for (const auto& fd : fds) ids.push_back(identity(fd.get()));
    return ids;
}

// One sendmsg carrying `bytes` with `fds` in one SCM_RIGHTS message and, when asked, our own
// credentials in an SCM_CREDENTIALS message. Returns the bytes sent or -errno.
ssize_t send_raw(int sock, std::span<const std::uint8_t> bytes, const std::vector<UniqueFd>& fds,
                 bool with_credentials = false) {
    iovec iov{const_cast<std::uint8_t*>(bytes.data()), bytes.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<std::uint8_t> control(CMSG_SPACE(sizeof(int) * SCM_MAX_FD) +
                                      CMSG_SPACE(sizeof(ucred)));
    std::size_t used = 0;
    if (!fds.empty() || with_credentials) {
        msg.msg_control = control.data();
        msg.msg_controllen = control.size();
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        if (!fds.empty()) {
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
            for (std::size_t i = 0; i < fds.size(); ++i) {
                const int fd = fds[i].get();
                std::memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof fd);
            }
            used += CMSG_SPACE(sizeof(int) * fds.size());
            c = CMSG_NXTHDR(&msg, c);
        }
        if (with_credentials) {
            const ucred cred{::getpid(), ::getuid(), ::getgid()};
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_CREDENTIALS;
            c->cmsg_len = CMSG_LEN(sizeof cred);
            std::memcpy(CMSG_DATA(c), &cred, sizeof cred);
            used += CMSG_SPACE(sizeof cred);
        }
        msg.msg_controllen = used;
    }
    const ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    return n < 0 ? -errno : n;
}

ssize_t send_raw(int sock, const Bytes& bytes, const std::vector<UniqueFd>& fds,
                 bool with_credentials = false) {
    return send_raw(sock, std::span<const std::uint8_t>(bytes), fds, with_credentials);
}

Bytes start_frame() {
    StartRequest s;
    s.argv = {"sh"};
    s.cwd_dev = 1;
    s.cwd_ino = 2;
    return encode_frame(FrameType::Start, encode(s));
}

bool cloexec(int fd) { return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0; }

// The pilot's receiver: an ancillary buffer sized for one descriptor. Unlike the pilot it
// does take ownership of what the kernel installed, so that the test itself does not leak.
struct PilotReceived {
    ssize_t bytes = -1;
    bool control_truncated = false;
    std::vector<UniqueFd> installed;
};

PilotReceived pilot_receive(int sock, std::span<std::uint8_t> buffer) {
    PilotReceived r;
    iovec iov{buffer.data(), buffer.size()};
    alignas(cmsghdr) std::uint8_t control[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    r.bytes = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (r.bytes < 0) return r;
    r.control_truncated = (msg.msg_flags & MSG_CTRUNC) != 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            r.installed.emplace_back(fd);
        }
    }
    return r;
}

// Decodes everything in `bytes`; returns the frames' types.
std::vector<FrameType> frame_types(const Bytes& bytes, FrameDecoder& d) {
    d.feed(std::span<const std::uint8_t>(bytes));
    std::vector<FrameType> types;
    Frame f{};
    while (d.next(f) == FrameDecoder::Status::Ready) types.push_back(f.type);
    return types;
}

// ---------------------------------------------------------------------------------------------

class FdCount : public ::testing::TestWithParam<std::size_t> {};

TEST_P(FdCount, StartWithNFdsDeliversExactlyThoseAndClosesThem) {
    const std::size_t n = GetParam();
    const int base = open_fd_count();
    {
        auto pair = socket_pair();
        const Bytes wire = start_frame();
        std::vector<Identity> sent;
        {
            const auto fds = make_fds(n);
            sent = identities(fds);
            ASSERT_EQ(send_raw(pair.sender.get(), wire, fds), static_cast<ssize_t>(wire.size()));
        }  // the sender's copies are closed; the kernel holds the in-flight references
        const int before = open_fd_count();
        {
            Bytes buffer(kMaxPayloadSize);
            auto r = receive_with_fds(pair.receiver.get(), buffer);
            EXPECT_EQ(r.error, 0) << std::strerror(-r.error);
            EXPECT_FALSE(r.eof);
            EXPECT_FALSE(r.control_truncated);
            ASSERT_EQ(r.bytes, wire.size());
            ASSERT_EQ(r.fds.size(), n);
            EXPECT_EQ(open_fd_count(), before + static_cast<int>(n));
            for (std::size_t i = 0; i < n; ++i) {
                ASSERT_TRUE(r.fds[i].valid());
                EXPECT_TRUE(cloexec(r.fds[i].get())) << i;
                EXPECT_EQ(identity(r.fds[i].get()), sent[i]) << "fd " << i;
            }
            FrameDecoder d;
            EXPECT_EQ(frame_types(Bytes(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(r.bytes)), d),
                      std::vector<FrameType>{FrameType::Start});
        }
        EXPECT_EQ(open_fd_count(), before);
    }
    EXPECT_EQ(open_fd_count(), base);
}

INSTANTIATE_TEST_SUITE_P(Hostile, FdCount,
                         ::testing::Values(std::size_t{0}, std::size_t{1}, std::size_t{2},
                                           std::size_t{3}, std::size_t{10},
                                           std::size_t{SCM_MAX_FD}));

TEST(FdPassing, MoreThanScmMaxFdCannotBeSent) {
    auto pair = socket_pair();
    const auto fds = make_fds(SCM_MAX_FD + 1);
    EXPECT_EQ(send_raw(pair.sender.get(), start_frame(), fds), -EINVAL);
}

TEST(FdPassing, FdsOnNonStartFramesAreReceivedAndClosed) {
    const int base = open_fd_count();
    {
        auto pair = socket_pair();
        const Bytes input = encode_frame(FrameType::Input, std::string_view{"ls\r"});
        const Bytes stop = encode_frame(FrameType::Stop, std::string_view{});
        ASSERT_EQ(send_raw(pair.sender.get(), input, make_fds(4)), static_cast<ssize_t>(input.size()));
        ASSERT_EQ(send_raw(pair.sender.get(), stop, make_fds(1)), static_cast<ssize_t>(stop.size()));
        const int before = open_fd_count();
        FrameDecoder d;
        Bytes buffer(4096);
        {
            auto r = receive_with_fds(pair.receiver.get(), buffer);
            ASSERT_EQ(r.error, 0);
            EXPECT_EQ(r.bytes, input.size());  // the kernel does not merge messages carrying fds
            EXPECT_EQ(r.fds.size(), 4u);
            EXPECT_EQ(open_fd_count(), before + 4);
            EXPECT_EQ(frame_types(Bytes(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(r.bytes)), d),
                      std::vector<FrameType>{FrameType::Input});
        }
        EXPECT_EQ(open_fd_count(), before);
        {
            auto r = receive_with_fds(pair.receiver.get(), buffer);
            ASSERT_EQ(r.error, 0);
            EXPECT_EQ(r.fds.size(), 1u);
            EXPECT_EQ(frame_types(Bytes(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(r.bytes)), d),
                      std::vector<FrameType>{FrameType::Stop});
        }
        EXPECT_EQ(open_fd_count(), before);
    }
    EXPECT_EQ(open_fd_count(), base);
}

TEST(FdPassing, FdsWithATruncatedPayloadThenClose) {
    const int base = open_fd_count();
    {
        auto pair = socket_pair();
        // A START header that promises 1000 bytes, 10 of them, 3 fds, then the sender leaves.
        Bytes wire(kHeaderSize);
        write_header(FrameType::Start, 1000, std::span<std::uint8_t, kHeaderSize>(wire.data(), kHeaderSize));
        wire.insert(wire.end(), {'{', '"', 'a', 'r', 'g', 'v', '"', ':', '[', '"'});
        ASSERT_EQ(send_raw(pair.sender.get(), wire, make_fds(3)), static_cast<ssize_t>(wire.size()));
        pair.sender.reset();
        const int before = open_fd_count();
        FrameDecoder d;
        Bytes buffer(kMaxPayloadSize);
        {
            auto r = receive_with_fds(pair.receiver.get(), buffer);
            ASSERT_EQ(r.error, 0);
            EXPECT_EQ(r.bytes, wire.size());
            EXPECT_EQ(r.fds.size(), 3u);
            EXPECT_EQ(open_fd_count(), before + 3);
            EXPECT_TRUE(frame_types(wire, d).empty());
            EXPECT_TRUE(d.mid_frame());
        }
        EXPECT_EQ(open_fd_count(), before);
        {
            auto r = receive_with_fds(pair.receiver.get(), buffer);
            EXPECT_EQ(r.error, 0);
            EXPECT_TRUE(r.eof);
            EXPECT_EQ(r.bytes, 0u);
            EXPECT_TRUE(r.fds.empty());
        }
        EXPECT_EQ(open_fd_count(), before);
    }
    EXPECT_EQ(open_fd_count(), base);
}

TEST(FdPassing, FdsSpreadOverSeveralMessages) {
    const int base = open_fd_count();
    {
        auto pair = socket_pair();
        const Bytes wire = start_frame();
        const std::size_t third = wire.size() / 3;
        const std::span<const std::uint8_t> all(wire);
        ASSERT_EQ(send_raw(pair.sender.get(), all.first(third), make_fds(2)), static_cast<ssize_t>(third));
        ASSERT_EQ(send_raw(pair.sender.get(), all.subspan(third, third), make_fds(7)), static_cast<ssize_t>(third));
        ASSERT_EQ(send_raw(pair.sender.get(), all.subspan(2 * third), make_fds(SCM_MAX_FD)),
                  static_cast<ssize_t>(wire.size() - 2 * third));
        pair.sender.reset();
        const int before = open_fd_count();
        std::size_t total_fds = 0, total_bytes = 0, reads = 0;
        Bytes buffer(kMaxPayloadSize);
        for (;;) {
            auto r = receive_with_fds(pair.receiver.get(), buffer);
            ASSERT_EQ(r.error, 0);
            EXPECT_FALSE(r.control_truncated);
            if (r.eof) break;
            ++reads;
            EXPECT_LE(r.fds.size(), std::size_t{SCM_MAX_FD});
            EXPECT_EQ(open_fd_count(), before + static_cast<int>(r.fds.size()));
            total_fds += r.fds.size();
            total_bytes += r.bytes;
        }
        EXPECT_EQ(reads, 3u);  // one recvmsg never returns the fds of two messages
        EXPECT_EQ(total_fds, 2u + 7u + SCM_MAX_FD);
        EXPECT_EQ(total_bytes, wire.size());
        EXPECT_EQ(open_fd_count(), before);
    }
    EXPECT_EQ(open_fd_count(), base);
}

// MSG_CTRUNC: the kernel truncates ancillary data only against the *receiver's* buffer. A
// sender cannot exceed SCM_MAX_FD in one message, nor get two messages' fds into one recvmsg,
// so against receive_with_fds (sized for SCM_MAX_FD plus credentials) it cannot force
// truncation. The pilot's one-fd buffer, though, truncates, and the kernel has still
// installed the descriptors that fit: the pilot's early return leaked exactly those.
TEST(FdTruncation, PilotSizedBufferTruncatesButReceiveWithFdsDoesNot) {
    const int base = open_fd_count();
    {
        auto pilot = socket_pair();
        auto ours = socket_pair();
        const Bytes wire = start_frame();
        ASSERT_EQ(send_raw(pilot.sender.get(), wire, make_fds(3)), static_cast<ssize_t>(wire.size()));
        ASSERT_EQ(send_raw(ours.sender.get(), wire, make_fds(3)), static_cast<ssize_t>(wire.size()));
        const int before = open_fd_count();
        Bytes buffer(kMaxPayloadSize);
        {
            auto r = pilot_receive(pilot.receiver.get(), buffer);
            ASSERT_EQ(r.bytes, static_cast<ssize_t>(wire.size()));
            EXPECT_TRUE(r.control_truncated);
            EXPECT_GE(r.installed.size(), 1u);
            EXPECT_LT(r.installed.size(), 3u);
            // Installed despite the truncation: whoever returns early without closing leaks.
            EXPECT_EQ(open_fd_count(), before + static_cast<int>(r.installed.size()));
        }
        EXPECT_EQ(open_fd_count(), before);
        {
            auto r = receive_with_fds(ours.receiver.get(), buffer);
            ASSERT_EQ(r.error, 0);
            EXPECT_FALSE(r.control_truncated);
            EXPECT_EQ(r.fds.size(), 3u);
            EXPECT_EQ(open_fd_count(), before + 3);
        }
        EXPECT_EQ(open_fd_count(), before);
    }
    EXPECT_EQ(open_fd_count(), base);
}

TEST(FdTruncation, PilotSizedBufferWithCredentialsGetsNoFdsAtAll) {
    const int base = open_fd_count();
    {
        auto pair = socket_pair();
        const int on = 1;
        ASSERT_EQ(::setsockopt(pair.receiver.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on), 0);
        const Bytes wire = start_frame();
        ASSERT_EQ(send_raw(pair.sender.get(), wire, make_fds(1)), static_cast<ssize_t>(wire.size()));
        const int before = open_fd_count();
        {
            Bytes buffer(kMaxPayloadSize);
            auto r = pilot_receive(pair.receiver.get(), buffer);
            ASSERT_EQ(r.bytes, static_cast<ssize_t>(wire.size()));
            EXPECT_TRUE(r.control_truncated);
            EXPECT_EQ(open_fd_count(), before + static_cast<int>(r.installed.size()));
        }
        EXPECT_EQ(open_fd_count(), before);
    }
    EXPECT_EQ(open_fd_count(), base);
}

TEST(FdTruncation, MaxFdsPlusCredentialsFitReceiveWithFds) {
    const int base = open_fd_count();
    {
        auto pair = socket_pair();
        const int on = 1;
        ASSERT_EQ(::setsockopt(pair.receiver.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on), 0);
        const Bytes wire = start_frame();
        std::vector<Identity> sent;
        {
            const auto fds = make_fds(SCM_MAX_FD);
            sent = identities(fds);
            ASSERT_EQ(send_raw(pair.sender.get(), wire, fds, /*with_credentials=*/true),
                      static_cast<ssize_t>(wire.size()));
        }
        const int before = open_fd_count();
        {
            Bytes buffer(kMaxPayloadSize);
            auto r = receive_with_fds(pair.receiver.get(), buffer);
            ASSERT_EQ(r.error, 0);
            EXPECT_FALSE(r.control_truncated);
            ASSERT_EQ(r.fds.size(), std::size_t{SCM_MAX_FD});
            EXPECT_EQ(open_fd_count(), before + SCM_MAX_FD);
            for (std::size_t i = 0; i < r.fds.size(); ++i)
                EXPECT_EQ(identity(r.fds[i].get()), sent[i]) << i;
        }
        EXPECT_EQ(open_fd_count(), before);
    }
    EXPECT_EQ(open_fd_count(), base);
}

// If the receiving socket has SO_PASSPIDFD set, every recvmsg also installs a pidfd of the
// sender (SCM_PIDFD). It is not a descriptor the peer chose to send, and it must not leak.
TEST(FdTruncation, PidfdFromSoPassPidfdIsNotLeaked) {
    const int base = open_fd_count();
    {
        auto pair = socket_pair();
        const int on = 1;
        if (::setsockopt(pair.receiver.get(), SOL_SOCKET, SO_PASSPIDFD, &on, sizeof on) != 0)
            GTEST_SKIP() << "SKIPPED, NOT TESTED: SO_PASSPIDFD is refused ("
                         << std::strerror(errno) << "): it needs Linux 6.5 or later, this is "
                         << kernel_release() << ". What it guards (a kernel-added SCM_PIDFD "
                         << "leaking a descriptor) cannot happen on such a kernel either";
        ASSERT_EQ(::setsockopt(pair.receiver.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on), 0);
        const Bytes wire = start_frame();
        for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{SCM_MAX_FD}}) {
            ASSERT_EQ(send_raw(pair.sender.get(), wire, make_fds(n)),
                      static_cast<ssize_t>(wire.size()));
            const int before = open_fd_count();
            {
                Bytes buffer(kMaxPayloadSize);
                auto r = receive_with_fds(pair.receiver.get(), buffer);
                ASSERT_EQ(r.error, 0);
                EXPECT_FALSE(r.control_truncated) << n;
                EXPECT_EQ(r.fds.size(), n);
                EXPECT_EQ(open_fd_count(), before + static_cast<int>(n)) << n;
            }
            EXPECT_EQ(open_fd_count(), before) << n;
        }
    }
    EXPECT_EQ(open_fd_count(), base);
}

TEST(FdPassing, ThousandsOfHostileSendsLeaveTheFdCountUnchanged) {
    const int base = open_fd_count();
    std::mt19937 rng(7);
    const Bytes frames[] = {
        start_frame(),
        encode_frame(FrameType::Input, std::string_view{"x"}),
        encode_frame(FrameType::Stop, std::string_view{}),
        {'P', 'V', 9, 1, 0, 0, 0, 0},  // unsupported version
        {'G', 'E', 'T', ' '},          // garbage
    };
    std::size_t delivered = 0;
    for (int i = 0; i < 2000; ++i) {
        auto pair = socket_pair();
        const Bytes& wire = frames[rng() % std::size(frames)];
        const std::size_t n = rng() % 12;
        ASSERT_EQ(send_raw(pair.sender.get(), wire, make_fds(n)), static_cast<ssize_t>(wire.size()));
        if (rng() % 2) pair.sender.reset();
        Bytes buffer(4096);
        auto r = (rng() % 3 == 0) ? receive_with_fds(pair.receiver.get(), std::span(buffer).first(3))
                                  : receive_with_fds(pair.receiver.get(), buffer);
        ASSERT_EQ(r.error, 0);
        delivered += r.fds.size();
        FrameDecoder d;
        (void)frame_types(Bytes(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(r.bytes)), d);
    }
    EXPECT_GT(delivered, 1000u);
    EXPECT_EQ(open_fd_count(), base);
}

TEST(FdPassing, ReceiveOnAnEmptySocketIsEagainWithoutFds) {
    auto pair = socket_pair();
    Bytes buffer(16);
    const auto r = receive_with_fds(pair.receiver.get(), buffer);
    EXPECT_EQ(r.error, -EAGAIN);
    EXPECT_FALSE(r.eof);
    EXPECT_TRUE(r.fds.empty());
}

TEST(FdPassing, ReceiveOnABadSocketReportsTheError) {
    Bytes buffer(16);
    const auto r = receive_with_fds(-1, buffer);
    EXPECT_EQ(r.error, -EBADF);
    EXPECT_TRUE(r.fds.empty());
}

// ---------------------------------------------------------------------------------------------
// send_with_fd

TEST(SendWithFd, DeliversExactlyOneUsableFd) {
    const int base = open_fd_count();
    {
        auto pair = socket_pair();
        int p[2];
        ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
        UniqueFd read_end(p[0]), write_end(p[1]);
        const Bytes wire = start_frame();
        ASSERT_EQ(send_with_fd(pair.sender.get(), wire, write_end.get()), 0);
        const Identity sent = identity(write_end.get());
        write_end.reset();
        const int before = open_fd_count();
        {
            Bytes buffer(kMaxPayloadSize);
            auto r = receive_with_fds(pair.receiver.get(), buffer);
            ASSERT_EQ(r.error, 0);
            EXPECT_EQ(r.bytes, wire.size());
            ASSERT_EQ(r.fds.size(), 1u);
            EXPECT_EQ(open_fd_count(), before + 1);
            EXPECT_EQ(identity(r.fds[0].get()), sent);
            EXPECT_TRUE(cloexec(r.fds[0].get()));
            // Usable: what we write through the received end comes out of the pipe.
            ASSERT_EQ(::write(r.fds[0].get(), "hi", 2), 2);
            char got[2] = {};
            ASSERT_EQ(::read(read_end.get(), got, 2), 2);
            EXPECT_EQ(std::string_view(got, 2), "hi");
            // Nothing further is queued.
            EXPECT_EQ(receive_with_fds(pair.receiver.get(), buffer).error, -EAGAIN);
        }
        EXPECT_EQ(open_fd_count(), before);
    }
    EXPECT_EQ(open_fd_count(), base);
}

TEST(SendWithFd, DirectoryFdMatchesItsStat) {
    const int base = open_fd_count();
    {
        auto pair = socket_pair();
        UniqueFd dir(::open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        ASSERT_TRUE(dir);
        struct stat st {};
        ASSERT_EQ(::fstat(dir.get(), &st), 0);
        const Bytes wire = start_frame();
        ASSERT_EQ(send_with_fd(pair.sender.get(), wire, dir.get()), 0);
        Bytes buffer(kMaxPayloadSize);
        auto r = receive_with_fds(pair.receiver.get(), buffer);
        ASSERT_EQ(r.fds.size(), 1u);
        struct stat got {};
        ASSERT_EQ(::fstat(r.fds[0].get(), &got), 0);
        EXPECT_TRUE(S_ISDIR(got.st_mode));
        EXPECT_EQ(got.st_dev, st.st_dev);
        EXPECT_EQ(got.st_ino, st.st_ino);
    }
    EXPECT_EQ(open_fd_count(), base);
}

TEST(SendWithFd, NegativeFdSendsNone) {
    auto pair = socket_pair();
    const Bytes wire = encode_frame(FrameType::Stop, std::string_view{});
    ASSERT_EQ(send_with_fd(pair.sender.get(), wire, -1), 0);
    Bytes buffer(64);
    const auto r = receive_with_fds(pair.receiver.get(), buffer);
    EXPECT_EQ(r.bytes, wire.size());
    EXPECT_TRUE(r.fds.empty());
}

TEST(SendWithFd, ClosedPeerIsAnErrorNotASignal) {
    auto pair = socket_pair();
    pair.receiver.reset();
    const Bytes wire = start_frame();
    UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(devnull);
    EXPECT_EQ(send_with_fd(pair.sender.get(), wire, devnull.get()), -EPIPE);
}

// Another process of the account stuffs a socket nobody reads with descriptors until the
// kernel refuses more (ETOOMANYREFS); a START must still get its directory through.
TEST(SendWithFd, GetsThroughAnAccountStuffedWithFdsInFlight) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root, to drop to another account";
    const int code = testing::run_as_nobody([] {
        auto stuffed = socket_pair();
        auto pair = socket_pair();
        UniqueFd dir(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        const auto copies = make_fds(SCM_MAX_FD);
        // A little above what is open (the sanitizers need a few descriptors of their own),
        // far below what two messages of copies put in flight.
        const auto soft = static_cast<rlim_t>(open_fd_count() + 16);
        const rlimit small{soft, 4096};
        if (::setrlimit(RLIMIT_NOFILE, &small) != 0) return 10;
        const Bytes one{'x'};
        bool refused = false;
        for (int i = 0; i < 8 && !refused; ++i)
            refused = send_raw(stuffed.sender.get(), one, copies) == -ETOOMANYREFS;
        if (!refused) return 11;

        const Bytes wire = start_frame();
        if (send_once(pair.sender.get(), wire, dir.get()) != -ETOOMANYREFS) return 12;
        if (send_with_fd(pair.sender.get(), wire, dir.get()) != 0) return 13;
        rlimit after{};
        if (::getrlimit(RLIMIT_NOFILE, &after) != 0 || after.rlim_cur != small.rlim_cur) return 14;
        // The receiving end stands for the daemon, which has room to install descriptors.
        const rlimit roomy{4096, 4096};
        if (::setrlimit(RLIMIT_NOFILE, &roomy) != 0) return 18;
        std::vector<std::uint8_t> buffer(wire.size());
        auto got = receive_with_fds(pair.receiver.get(), buffer);
        if (got.fds.size() != 1 || got.bytes != wire.size()) return 15;

        // No headroom (soft == hard): the refusal is reported as it is.
        const rlimit tight{soft, soft};
        if (::setrlimit(RLIMIT_NOFILE, &tight) != 0) return 16;
        if (send_with_fd(pair.sender.get(), wire, dir.get()) != -ETOOMANYREFS) return 17;
        return 0;
    });
    EXPECT_EQ(code, 0) << "see the numbered steps in the test";
}

// A payload bigger than the socket buffer goes out in several sendmsg calls; the fd rides on
// the first and only the first.
TEST(SendWithFd, LargeSendAttachesTheFdOnce) {
    const int base = open_fd_count();
    {
        auto pair = socket_pair();
        const int small = 4096;
        ASSERT_EQ(::setsockopt(pair.sender.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
        ASSERT_EQ(::setsockopt(pair.receiver.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
        UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
        ASSERT_TRUE(devnull);
        Bytes payload(kMaxPayloadSize, 'a');
        int send_result = -1;
        std::thread sender([&] {
            send_result = send_with_fd(pair.sender.get(), payload, devnull.get());
            pair.sender.reset();
        });
        std::size_t bytes = 0, fds = 0;
        int receive_error = 0;
        Bytes buffer(8192);
        for (;;) {
            pollfd pfd{pair.receiver.get(), POLLIN, 0};
            if (::poll(&pfd, 1, 10000) != 1) {
                receive_error = -ETIMEDOUT;
                break;
            }
            auto r = receive_with_fds(pair.receiver.get(), buffer);
            if (r.error == -EAGAIN) continue;
            if (r.error != 0) {
                receive_error = r.error;
                break;
            }
            if (r.eof) break;
            bytes += r.bytes;
            fds += r.fds.size();
        }
        pair.receiver.reset();  // unblocks the sender if we stopped early
        sender.join();
        EXPECT_EQ(receive_error, 0) << std::strerror(-receive_error);
        EXPECT_EQ(send_result, 0);
        EXPECT_EQ(bytes, payload.size());
        EXPECT_EQ(fds, 1u);
    }
    EXPECT_EQ(open_fd_count(), base);
}

}  // namespace
}  // namespace ptyvisor::protocol
