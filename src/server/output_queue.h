// OutputQueue: encoded frames waiting for a non-blocking client socket.
//
// Bounded by its owner, which stops producing (stops reading the PTY) while size() is at
// or above its limit: a client that stops reading stalls the terminal, it never grows this.
// OUTPUT payloads are read from the PTY straight into the queue, behind their header.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <memory>
#include <utility>
#include <vector>

#include "protocol/frame.h"

namespace ptyvisor::server {

// An allocator whose resize() leaves bytes uninitialised: a 64 KiB read area is about to
// be overwritten by read(2), and zero-filling it first cost more than the read itself.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
    template <class U>
    struct rebind {
        using other = UninitializedAllocator<U>;
    };
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

class OutputQueue {
public:
    // Frames are written in the connection's protocol version (frame.h).
    void set_version(std::uint8_t version) { version_ = version; }
    void push(protocol::FrameType type, std::string_view payload);

    // One OUTPUT frame of `first` then `second` (the two pieces of a ring's view), copied;
    // together at most kMaxIoPayloadSize bytes, and not both empty.
    void push_output(std::span<const std::uint8_t> first, std::span<const std::uint8_t> second);

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
    // A busy session keeps its buffer; one that bursted past this gives the excess back.
    static constexpr std::size_t kIdleCapacity = 128 * 1024;
    void compact();
    void advance_head();  // head_start_/head_end_ bracket the frame that holds start_

    std::vector<std::uint8_t, UninitializedAllocator<std::uint8_t>> data_;
    std::size_t start_ = 0;
    std::size_t reserved_at_ = 0;
    std::size_t head_start_ = 0;
    std::size_t head_end_ = 0;
    std::uint8_t version_ = protocol::kVersion;
};

}  // namespace ptyvisor::server
