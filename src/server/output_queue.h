// OutputQueue: encoded frames waiting for a non-blocking client socket.
//
// Bounded by its owner, which stops producing (stops reading the PTY) while size() is at
// or above its limit: a client that stops reading stalls the terminal, it never grows this.
// OUTPUT payloads are read from the PTY straight into the queue, behind their header.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "protocol/frame.h"

namespace ptyvisor::server {

class OutputQueue {
public:
    void push(protocol::FrameType type, std::string_view payload);

    // Space for one OUTPUT frame of up to `max` payload bytes; fill it, then commit(n).
    std::span<std::uint8_t> prepare_output(std::size_t max);
    void commit_output(std::size_t n);

    enum class Flush { Drained, Blocked, Failed };
    // Writes as much as the socket takes. `progress` is set when any byte was written.
    Flush flush(int socket, bool& progress);

    // Drops every frame not yet begun; a frame partly written is kept, so that the stream
    // stays well framed for whatever is queued after.
    void drop_unsent();

    [[nodiscard]] std::size_t size() const { return data_.size() - start_; }
    [[nodiscard]] bool empty() const { return size() == 0; }

private:
    static constexpr std::size_t kIdleCapacity = 16 * 1024;
    void compact();
    void advance_head();  // head_start_/head_end_ bracket the frame that holds start_

    std::vector<std::uint8_t> data_;
    std::size_t start_ = 0;
    std::size_t reserved_at_ = 0;
    std::size_t head_start_ = 0;
    std::size_t head_end_ = 0;
};

}  // namespace ptyvisor::server
