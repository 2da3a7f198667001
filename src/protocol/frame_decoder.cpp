#include "protocol/frame_decoder.h"

namespace ptyvisor::protocol {

void FrameDecoder::feed(std::span<const std::uint8_t> bytes) {
    if (failed_ || bytes.empty()) return;
    if (start_ > 0 && start_ == buffer_.size()) {
        buffer_.clear();
        start_ = 0;
    }
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

FrameDecoder::Status FrameDecoder::next(Frame& out) {
    if (failed_) return Status::Failed;
    if (buffered() < kHeaderSize) return Status::NeedMore;
    const auto result =
        parse_header(std::span<const std::uint8_t, kHeaderSize>(buffer_.data() + start_, kHeaderSize));
    if (!result.header) {
        failed_ = true;
        error_ = result.error;
        buffer_.clear();
        buffer_.shrink_to_fit();
        start_ = 0;
        return Status::Failed;
    }
    const Header h = *result.header;
    if (buffered() < kHeaderSize + h.length) return Status::NeedMore;
    const auto first = buffer_.begin() + static_cast<std::ptrdiff_t>(start_ + kHeaderSize);
    out.type = h.type;
    out.version = h.version;
    out.payload.assign(first, first + h.length);
    start_ += kHeaderSize + h.length;
    // Keep the buffer from creeping: drop consumed bytes once they dominate.
    if (start_ == buffer_.size()) {
        buffer_.clear();
        start_ = 0;
    } else if (start_ > buffer_.size() / 2) {
        buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(start_));
        start_ = 0;
    }
    return Status::Ready;
}

}  // namespace ptyvisor::protocol
