// OutgoingQueue: encoded frames waiting for a non-blocking socket to take them.
//
// Invariant: the queue holds whole frames in the order they were queued, and bytes leave it
// only from the front, so frames are never interleaved or reordered. The queue does not bound
// itself: callers look at size() and stop producing (Connection::output_full()) instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace ptyvisor::client {

class OutgoingQueue {
public:
    void push(std::vector<std::uint8_t> frame);

    // Result of one attempt to write the queue to a socket.
    struct FlushResult {
        bool drained = false;  // nothing is left to write
        int error = 0;         // 0, or the negative errno of a failed send (never EAGAIN or EINTR)
    };
    // Writes as much as `socket` takes without blocking (MSG_DONTWAIT, MSG_NOSIGNAL).
    FlushResult flush(int socket);

    void clear();
    [[nodiscard]] bool empty() const { return bytes_ == 0; }
    [[nodiscard]] std::size_t size() const { return bytes_; }

private:
    void consume(std::size_t n);

    std::deque<std::vector<std::uint8_t>> frames_;
    std::size_t front_offset_ = 0;  // bytes of frames_.front() already sent
    std::size_t bytes_ = 0;         // unsent bytes in total
};

}  // namespace ptyvisor::client
