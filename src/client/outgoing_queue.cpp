#include "client/outgoing_queue.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cerrno>

namespace ptyvisor::client {
namespace {

// Frames handed to one sendmsg: enough to fill a socket buffer with small frames.
constexpr std::size_t kMaxIovecs = 64;

}  // namespace

void OutgoingQueue::push(std::vector<std::uint8_t> frame) {
    if (frame.empty()) return;
    bytes_ += frame.size();
    frames_.push_back(std::move(frame));
}

OutgoingQueue::FlushResult OutgoingQueue::flush(int socket) {
    while (!empty()) {
        std::array<iovec, kMaxIovecs> iov{};
        std::size_t count = 0;
        for (auto it = frames_.begin(); it != frames_.end() && count < kMaxIovecs; ++it, ++count) {
            const std::size_t skip = count == 0 ? front_offset_ : 0;
            iov[count].iov_base = it->data() + skip;
            iov[count].iov_len = it->size() - skip;
        }
        msghdr msg{};
        msg.msg_iov = iov.data();
        msg.msg_iovlen = count;
        const ssize_t n = ::sendmsg(socket, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return {false, 0};
            return {false, -errno};
        }
        consume(static_cast<std::size_t>(n));
    }
    return {true, 0};
}

void OutgoingQueue::clear() {
    frames_.clear();
    front_offset_ = 0;
    bytes_ = 0;
}

void OutgoingQueue::consume(std::size_t n) {
    bytes_ -= n;
    while (n > 0) {
        const std::size_t left = frames_.front().size() - front_offset_;
        if (n < left) {
            front_offset_ += n;
            return;
        }
        n -= left;
        frames_.pop_front();
        front_offset_ = 0;
    }
}

}  // namespace ptyvisor::client
