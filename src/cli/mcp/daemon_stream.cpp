#include "cli/mcp/daemon_stream.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "client/client_error.h"

namespace ptyvisor::cli::mcp {
namespace {

constexpr std::size_t kReadBufferSize = protocol::kHeaderSize + protocol::kMaxIoPayloadSize;

}  // namespace

bool DaemonStream::open(const std::string& socket_path, protocol::FrameType type, std::string_view payload,
                        std::uint8_t version, std::string& why) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path) {
        why = "cannot connect to " + socket_path + ": invalid socket path";
        return false;
    }
    std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
    socket_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!socket_) {
        why = client::errno_message("cannot create a socket", errno);
        return false;
    }
    // A Unix stream socket connects at once or fails (EAGAIN: the daemon's queue is full).
    if (::connect(socket_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) < 0) {
        why = errno == EAGAIN ? "cannot connect to " + socket_path + ": the daemon's queue of connections is full"
                              : client::errno_message("cannot connect to " + socket_path, errno);
        socket_.reset();
        return false;
    }
    outgoing_ = protocol::encode_frame(type, payload, version);
    flush();  // a fresh socket's buffer takes the small request at once
    return true;
}

void DaemonStream::flush() {
    while (!outgoing_.empty()) {
        const ssize_t n = ::send(socket_.get(), outgoing_.data(), outgoing_.size(), MSG_NOSIGNAL);
        if (n > 0) {
            outgoing_.erase(outgoing_.begin(), outgoing_.begin() + n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        // The daemon closed first (after an ERROR, say): what it sent is still to be read.
        outgoing_.clear();
    }
}

short DaemonStream::events() const { return static_cast<short>(POLLIN | (outgoing_.empty() ? 0 : POLLOUT)); }

bool DaemonStream::service(short revents, std::vector<protocol::Frame>& frames, std::string& why) {
    frames.clear();
    if (closed_) return true;
    flush();
    if ((revents & (POLLIN | POLLHUP | POLLERR)) == 0) return true;
    std::vector<std::uint8_t> buffer(kReadBufferSize);
    const ssize_t n = ::read(socket_.get(), buffer.data(), buffer.size());
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    if (n < 0 && errno != ECONNRESET) {
        why = client::errno_message("cannot read from ptyvisord", errno);
        return false;
    }
    if (n > 0) decoder_.feed(std::span<const std::uint8_t>(buffer.data(), static_cast<std::size_t>(n)));
    for (;;) {
        protocol::Frame frame;
        const auto status = decoder_.next(frame);
        if (status == protocol::FrameDecoder::Status::NeedMore) break;
        if (status == protocol::FrameDecoder::Status::Failed) {
            why = "bad frame from ptyvisord (" + std::string(protocol::to_string(decoder_.error())) + ")";
            return false;
        }
        frames.push_back(std::move(frame));
    }
    if (n <= 0) {  // end of stream (a reset after the daemon's last frame is one too)
        closed_ = true;
        if (decoder_.mid_frame()) {
            why = "ptyvisord closed the connection in the middle of a frame";
            return false;
        }
    }
    return true;
}

}  // namespace ptyvisor::cli::mcp
