// FrameDecoder: turns a byte stream from a non-blocking socket into frames.
//
// Bytes may arrive in any split: a header across several reads, several frames in one read.
// The header is validated (parse_header) as soon as its 8 bytes are present, so a hostile
// length is refused before more of its payload is read: what is buffered of it is at most
// the rest of the one read that carried the header. The decoder holds at most one partial
// frame plus whatever the caller fed since the last complete frame; callers bound that by
// feeding at most one read buffer between calls to next().
//
// After an error the decoder stays failed: the stream has lost framing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "protocol/frame.h"

namespace ptyvisor::protocol {

class FrameDecoder {
public:
    enum class Status { NeedMore, Ready, Failed };

    void feed(std::span<const std::uint8_t> bytes);

    // Ready: `out` holds the next frame. NeedMore: wait for bytes. Failed: see error().
    Status next(Frame& out);

    [[nodiscard]] ErrorCode error() const { return error_; }
    [[nodiscard]] std::size_t buffered() const { return buffer_.size() - start_; }
    // True when bytes of an unfinished frame are buffered.
    [[nodiscard]] bool mid_frame() const { return buffered() > 0; }

private:
    std::vector<std::uint8_t> buffer_;
    std::size_t start_ = 0;  // first unconsumed byte of buffer_
    bool failed_ = false;
    ErrorCode error_ = ErrorCode::BadFrame;
};

}  // namespace ptyvisor::protocol
