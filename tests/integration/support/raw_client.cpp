#include "support/raw_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/linux.h"
#include "protocol/error_code.h"
#include "protocol/fd_passing.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;

// The helper's loop: one request (a socket path) in, one reply (errno, plus the connected
// socket on success) out. Async-signal-safe: it runs in a forked child of a test process.
[[noreturn]] void connector_main(int control) {
    for (;;) {
        char path[sizeof(sockaddr_un::sun_path)];
        const ssize_t n = ::recv(control, path, sizeof path - 1, 0);
        if (n <= 0) ::_exit(0);
        path[n] = '\0';
        int err = 0;
        const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
        if (s < 0) {
            err = errno;
        } else {
            sockaddr_un addr{};
            addr.sun_family = AF_UNIX;
            std::memcpy(addr.sun_path, path, static_cast<std::size_t>(n) + 1);
            if (::connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
                err = errno;
        }
        const long sent = protocol::send_once(
            control, std::span(reinterpret_cast<const std::uint8_t*>(&err), sizeof err), err == 0 ? s : -1);
        if (s >= 0) ::close(s);
        if (sent < 0) ::_exit(1);
        // Then says it has closed its copy: from now on the test's is the socket's only one, so
        // that a test which closes it knows the daemon sees the end (a hang-up before accept).
        const char closed = 0;
        if (::send(control, &closed, 1, MSG_NOSIGNAL) < 0) ::_exit(1);
    }
}

std::string frame_summary(const protocol::Frame& f) {
    std::string text(f.text().substr(0, 300));
    return std::string(protocol::to_string(f.type)) + " " + text;
}

}  // namespace

std::unique_ptr<Connector> Connector::start(uid_t uid, gid_t gid, std::vector<gid_t> groups,
                                            std::string& error) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        error = std::string("socketpair: ") + std::strerror(errno);
        return nullptr;
    }
    UniqueFd parent_end(sv[0]);
    UniqueFd child_end(sv[1]);
    const pid_t pid = ::fork();
    if (pid < 0) {
        error = std::string("fork: ") + std::strerror(errno);
        return nullptr;
    }
    if (pid == 0) {
        // Keep only stdio and the control socket: the helper must hold no copy of the test's
        // other descriptors (client pipes, daemon pidfds, raw sockets).
        const int keep = ::dup2(child_end.get(), 3);
        ::close_range(4, ~0U, 0);
        if (keep != 3 || !drop_privileges(uid, gid, groups)) ::_exit(125);
        ::signal(SIGPIPE, SIG_IGN);
        connector_main(3);
    }
    std::unique_ptr<Connector> c(new Connector());
    c->pid_ = pid;
    c->pidfd_ = open_pidfd(pid);
    c->control_ = std::move(parent_end);
    return c;
}

Connector::~Connector() {
    control_.reset();  // the helper sees EOF and exits
    if (pidfd_) {
        if (!wait_pidfd_exit(pidfd_.get(), Millis(5000)))
            ptyvisor::pidfd_send_signal(pidfd_.get(), SIGKILL);
        siginfo_t info{};
        ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info, WEXITED);
    }
}

UniqueFd Connector::connect(const std::string& path, int& err) {
    err = 0;
    if (path.size() >= sizeof(sockaddr_un::sun_path)) {
        err = ENAMETOOLONG;
        return {};
    }
    if (::send(control_.get(), path.data(), path.size(), MSG_NOSIGNAL) < 0) {
        err = errno;
        return {};
    }
    if (!(wait_fd(control_.get(), POLLIN, Clock::now() + Millis(10000)) & POLLIN)) {
        err = ETIMEDOUT;
        return {};
    }
    int reply = 0;
    iovec iov{&reply, sizeof reply};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control_buf[CMSG_SPACE(sizeof(int))];
    msg.msg_control = control_buf;
    msg.msg_controllen = sizeof control_buf;
    if (::recvmsg(control_.get(), &msg, MSG_CMSG_CLOEXEC) < 0) {
        err = errno;
        return {};
    }
    UniqueFd fd;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int received;
            std::memcpy(&received, CMSG_DATA(c), sizeof received);
            fd.reset(received);
        }
    }
    char closed = 1;
    if (!(wait_fd(control_.get(), POLLIN, Clock::now() + Millis(10000)) & POLLIN) ||
        ::recv(control_.get(), &closed, 1, 0) != 1 || closed != 0) {
        err = ETIMEDOUT;  // the helper never said it closed its copy
        return {};
    }
    if (reply != 0) {
        err = reply;
        return {};
    }
    if (!fd) err = EPROTO;
    return fd;
}

std::string Incoming::describe() const {
    switch (kind) {
        case Kind::Frame: return frame_summary(frame);
        case Kind::Eof: return "end of stream";
        case Kind::Timeout: return "nothing (timeout)";
        case Kind::BadStream: return "an undecodable stream: header " + detail;
    }
    return "?";
}

int RawClient::send(const std::vector<std::uint8_t>& bytes, const std::vector<int>& fds) {
    std::size_t sent = 0;
    bool fds_sent = fds.empty();
    std::vector<std::uint8_t> control(CMSG_SPACE(sizeof(int) * (fds.empty() ? 1 : fds.size())));
    while (sent < bytes.size() || !fds_sent) {
        iovec iov{const_cast<std::uint8_t*>(bytes.data() + sent), bytes.size() - sent};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        if (!fds_sent) {
            msg.msg_control = control.data();
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
            cmsghdr* c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
            std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
        }
        const ssize_t n = ::sendmsg(socket_.get(), &msg, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        fds_sent = true;
        sent += static_cast<std::size_t>(n);
    }
    return 0;
}

int RawClient::send_frame(FrameType type, const std::string& payload, const std::vector<int>& fds) {
    return send(protocol::encode_frame(type, payload), fds);
}

protocol::StartRequest RawClient::start_request(const std::vector<std::string>& argv,
                                                const std::vector<std::string>& env, int cwd_fd) {
    protocol::StartRequest r;
    r.argv = argv;
    r.env = env;
    struct stat st{};
    if (cwd_fd >= 0 && ::fstat(cwd_fd, &st) == 0) {
        r.cwd_dev = st.st_dev;
        r.cwd_ino = st.st_ino;
    }
    r.term = "xterm";
    r.size = {24, 80};
    return r;
}

int RawClient::send_start(const protocol::StartRequest& request, const std::vector<int>& fds) {
    return send_frame(FrameType::Start, protocol::encode(request), fds);
}

int RawClient::send_start_as_client(const protocol::StartRequest& request, int cwd_fd) {
    return protocol::send_with_fd(socket_.get(), protocol::encode_frame(FrameType::Start, protocol::encode(request)),
                                  cwd_fd);
}

Incoming RawClient::next(Millis timeout, std::size_t read_chunk) {
    const auto deadline = Clock::now() + timeout;
    std::vector<std::uint8_t> buf(read_chunk);
    for (;;) {
        // A frame already buffered?
        if (buffer_.size() - start_ >= protocol::kHeaderSize) {
            const auto h = protocol::parse_header(
                std::span<const std::uint8_t, protocol::kHeaderSize>(buffer_.data() + start_,
                                                                     protocol::kHeaderSize));
            if (!h.header) {
                Incoming bad{Incoming::Kind::BadStream, {}, {}};
                static constexpr char kHex[] = "0123456789abcdef";
                for (std::size_t i = 0; i < protocol::kHeaderSize; ++i) {
                    bad.detail += kHex[buffer_[start_ + i] >> 4];
                    bad.detail += kHex[buffer_[start_ + i] & 15];
                    bad.detail += ' ';
                }
                bad.detail += "(" + std::string(protocol::to_string(h.error)) + ", " +
                              std::to_string(received_) + " bytes received before)";
                return bad;
            }
            if (buffer_.size() - start_ >= protocol::kHeaderSize + h.header->length) {
                Incoming in{Incoming::Kind::Frame, {}, {}};
                in.frame.type = h.header->type;
                in.frame.version = h.header->version;
                const auto first =
                    buffer_.begin() + static_cast<std::ptrdiff_t>(start_ + protocol::kHeaderSize);
                in.frame.payload.assign(first, first + h.header->length);
                start_ += protocol::kHeaderSize + h.header->length;
                if (start_ == buffer_.size()) {
                    buffer_.clear();
                    start_ = 0;
                }
                return in;
            }
        }
        if (!(wait_fd(socket_.get(), POLLIN, deadline) & (POLLIN | POLLHUP | POLLERR)))
            return {Incoming::Kind::Timeout, {}, {}};
        const ssize_t n = ::recv(socket_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
        if (n == 0) return {Incoming::Kind::Eof, {}, {}};
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            // ECONNRESET: the daemon closed with our bytes unread. Same as EOF for us.
            return {Incoming::Kind::Eof, {}, {}};
        }
        received_ += static_cast<std::size_t>(n);
        if (start_ > 0 && start_ > buffer_.size() / 2) {
            buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(start_));
            start_ = 0;
        }
        buffer_.insert(buffer_.end(), buf.begin(), buf.begin() + n);
    }
}

std::optional<protocol::ErrorReply> RawClient::expect_error(Millis timeout, std::string* seen) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        const Incoming in = next(left < Millis(0) ? Millis(0) : left);
        if (in.kind == Incoming::Kind::Frame && in.frame.type == FrameType::Error) {
            auto decoded = protocol::decode_error(in.frame.text());
            if (!decoded && seen) *seen += "undecodable ERROR: " + decoded.error + "; ";
            return decoded.value;
        }
        if (seen) *seen += in.describe() + "; ";
        if (in.kind != Incoming::Kind::Frame) return std::nullopt;
        if (in.frame.type == FrameType::Output) output_.append(in.frame.text());
        if (in.frame.type == FrameType::Exit) return std::nullopt;
    }
}

std::optional<protocol::Started> RawClient::expect_started(Millis timeout, std::string* seen) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        const Incoming in = next(left < Millis(0) ? Millis(0) : left);
        if (in.kind == Incoming::Kind::Frame && in.frame.type == FrameType::Started) {
            auto decoded = protocol::decode_started(in.frame.text());
            if (!decoded && seen) *seen += "undecodable STARTED: " + decoded.error + "; ";
            return decoded.value;
        }
        if (seen) *seen += in.describe() + "; ";
        if (in.kind == Incoming::Kind::Frame && in.frame.type == FrameType::Output) {
            // OUTPUT before STARTED is a protocol violation worth reporting, not hiding.
            output_.append(in.frame.text());
            return std::nullopt;
        }
        return std::nullopt;
    }
}

bool RawClient::read_output_until(const std::string& needle, Millis timeout, std::string* seen) {
    const auto deadline = Clock::now() + timeout;
    while (output_.find(needle) == std::string::npos) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        const Incoming in = next(left < Millis(0) ? Millis(0) : left);
        if (in.kind == Incoming::Kind::Frame && in.frame.type == FrameType::Output) {
            output_.append(in.frame.text());
            continue;
        }
        if (seen) *seen += in.describe() + "; ";
        return false;
    }
    return true;
}

std::optional<protocol::ExitStatus> RawClient::read_until_exit(Millis timeout, std::string* seen) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        const Incoming in = next(left < Millis(0) ? Millis(0) : left);
        if (in.kind == Incoming::Kind::Frame && in.frame.type == FrameType::Output) {
            output_.append(in.frame.text());
            continue;
        }
        if (in.kind == Incoming::Kind::Frame && in.frame.type == FrameType::Exit) {
            auto decoded = protocol::decode_exit(in.frame.text());
            if (!decoded && seen) *seen += "undecodable EXIT: " + decoded.error + "; ";
            return decoded.value;
        }
        if (seen) *seen += in.describe() + "; ";
        return std::nullopt;
    }
}

bool RawClient::expect_eof(Millis timeout, std::string* seen) {
    const Incoming in = next(timeout);
    if (in.kind == Incoming::Kind::Eof) return true;
    if (seen) *seen += in.describe() + "; ";
    return false;
}

std::unique_ptr<RawClient> connect_raw(Connector& connector, const std::string& socket_path,
                                       std::string& error) {
    int err = 0;
    UniqueFd fd = connector.connect(socket_path, err);
    if (!fd) {
        error = "connect to " + socket_path + " failed: " + std::strerror(err);
        return nullptr;
    }
    return std::make_unique<RawClient>(std::move(fd));
}

}  // namespace ptyvisor::itest
