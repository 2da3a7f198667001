#include "server/output_queue.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace ptyvisor::server {

using protocol::kHeaderSize;

void OutputQueue::push(protocol::FrameType type, std::string_view payload) {
    compact();
    const auto frame = protocol::encode_frame(type, payload, version_);
    data_.insert(data_.end(), frame.begin(), frame.end());
}

void OutputQueue::compact() {
    advance_head();
    // Erase whole sent frames only: the frame being sent must stay findable (drop_unsent).
    if (head_start_ > 0 && head_start_ >= data_.size() / 2) {
        data_.erase(data_.begin(), data_.begin() + static_cast<std::ptrdiff_t>(head_start_));
        start_ -= head_start_;
        head_end_ -= head_start_;
        head_start_ = 0;
    }
}

void OutputQueue::advance_head() {
    while (head_end_ <= start_ && head_end_ < data_.size()) {
        head_start_ = head_end_;
        const std::uint8_t* h = data_.data() + head_start_;
        const std::uint32_t length = (std::uint32_t{h[4]} << 24) | (std::uint32_t{h[5]} << 16) |
                                     (std::uint32_t{h[6]} << 8) | std::uint32_t{h[7]};
        head_end_ = head_start_ + kHeaderSize + length;
    }
}

void OutputQueue::drop_unsent() {
    advance_head();
    if (start_ > head_start_ && start_ < head_end_) {
        data_.resize(head_end_);  // finish the frame the client has begun to read
    } else {
        data_.clear();
        start_ = head_start_ = head_end_ = 0;
    }
}

void OutputQueue::push_output(std::span<const std::uint8_t> first, std::span<const std::uint8_t> second) {
    auto space = prepare_output(first.size() + second.size());
    std::copy(first.begin(), first.end(), space.begin());
    std::copy(second.begin(), second.end(), space.begin() + static_cast<std::ptrdiff_t>(first.size()));
    commit_output(space.size());
}

std::span<std::uint8_t> OutputQueue::prepare_output(std::size_t max) {
    compact();
    reserved_at_ = data_.size();
    data_.resize(reserved_at_ + kHeaderSize + max);
    return {data_.data() + reserved_at_ + kHeaderSize, max};
}

void OutputQueue::commit_output(std::size_t n) {
    if (n == 0) {
        data_.resize(reserved_at_);
        return;
    }
    data_.resize(reserved_at_ + kHeaderSize + n);
    protocol::write_header(protocol::FrameType::Output, static_cast<std::uint32_t>(n),
                           std::span<std::uint8_t, kHeaderSize>(data_.data() + reserved_at_, kHeaderSize), version_);
}

OutputQueue::Flush OutputQueue::flush(int socket, bool& progress) {
    progress = false;
    while (!empty()) {
        const ssize_t n = ::send(socket, data_.data() + start_, size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return Flush::Blocked;
            return Flush::Failed;
        }
        progress = true;
        start_ += static_cast<std::size_t>(n);
    }
    data_.clear();
    start_ = head_start_ = head_end_ = 0;
    // An idle session should not keep a burst's worth of memory.
    if (data_.capacity() > kIdleCapacity) data_.shrink_to_fit();
    return Flush::Drained;
}

}  // namespace ptyvisor::server
