// OutputLog: a session's output, kept as a bounded ring in a memfd.
//
// Bytes are addressed by absolute offsets from the session's first byte; offsets are u64
// and only grow. The log holds [start(), end()), at most capacity() bytes; the byte at
// offset o lives at ring position o % capacity(). Writing past capacity drops the oldest
// bytes (start advances).
//
// The log lives in a memfd, not in our heap, so that it can be handed to systemd's fd store
// and taken back by adopt() after a daemon restart. Layout of the memfd (host byte order:
// it never leaves this machine):
//
//   [0, 4096)                    header: magic "PTYVLOG1", u32 version, u32 zero,
//                                u64 capacity, u64 start, u64 end
//   [4096, 4096 + capacity)      ring data
//
// Invariants:
//   - The memfd is sealed F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL once sized: whoever else
//     holds it (the fd store, a debugger) cannot shrink it under our mapping (SIGBUS).
//   - The in-memory start/end are authoritative; the header is a copy for adopt(). Nothing
//     read from the header is used before it is checked, so a forged or torn header can at
//     worst make adopt() fail, never make us touch memory outside the mapping.
//   - At every instant, the header's [start, end) names bytes that are in the ring and right:
//     start is advanced past whatever a write may overwrite before the write, end is advanced
//     after the bytes are written. A daemon that dies at any point leaves a log adopt() takes.
//
// Not thread-safe; one owner (the session's event loop).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "common/unique_fd.h"

namespace ptyvisor::server {

class OutputLog {
  public:
    static constexpr std::size_t kDefaultCapacity = 2 * 1024 * 1024;
    static constexpr std::size_t kMinCapacity = 64 * 1024;
    static constexpr std::size_t kMaxCapacity = 1024u * 1024 * 1024;
    static constexpr std::size_t kHeaderSize = 4096;
    static constexpr std::uint32_t kVersion = 1;

    // A new, empty log. `capacity` is clamped to [kMinCapacity, kMaxCapacity] and rounded
    // up to a multiple of the page size. `name` names the memfd (/proc/PID/fd, for
    // debugging only); it is cut to the kernel's 249 bytes.
    // Returns 0, or -errno (memfd_create, ftruncate, fcntl, mmap; -ENOMEM).
    static int create(std::string_view name, std::size_t capacity, std::unique_ptr<OutputLog>& out);

    // Takes back a memfd made by create(), e.g. from the fd store after a daemon restart.
    // Returns 0, or:
    //   -EBADMSG  the descriptor is not a log create() made: not a regular file or not
    //             sealable, missing one of the seals SHRINK|GROW|SEAL, write-sealed, size
    //             too small or not 4096 + capacity, bad magic or version, capacity not a
    //             page multiple within [kMin, kMax], start > end, end - start > capacity;
    //   -errno    a system call failed for another reason (e.g. -EBADF, -ENOMEM from mmap).
    static int adopt(UniqueFd memfd, std::unique_ptr<OutputLog>& out);

    ~OutputLog();
    OutputLog(const OutputLog&) = delete;
    OutputLog& operator=(const OutputLog&) = delete;

    [[nodiscard]] std::uint64_t start() const { return start_; }
    [[nodiscard]] std::uint64_t end() const { return end_; }
    [[nodiscard]] std::size_t capacity() const { return capacity_; }
    // The memfd, for the fd store; the log keeps ownership.
    [[nodiscard]] int fd() const { return memfd_.get(); }

    // One readv(2) (retried on EINTR only) of up to `max` bytes from `fd`, a non-blocking
    // PTY master, straight into the ring. `max` above capacity() is taken as capacity().
    // Returns the count read (> 0), 0 at EOF, or -errno (-EAGAIN, -EIO once a PTY's peer is
    // gone, ...); -EINVAL when max is 0 (a 0 from readv would read as EOF).
    ssize_t read_from(int fd, std::size_t max);

    // Appends `bytes`. Of data longer than capacity() only the last capacity() bytes stay,
    // but end() advances by all of it: offsets count every byte the session produced.
    void append(std::span<const std::uint8_t> bytes);

    // The held bytes [offset, min(end(), offset + max)), as at most two contiguous pieces of
    // the mapping (the second when the range wraps), valid until the next append or
    // read_from. An offset below start() (dropped) is taken as start(), one above end() as
    // end() (an empty view): callers check start() to learn they missed bytes.
    struct View {
        std::span<const std::uint8_t> first, second;
        [[nodiscard]] std::size_t size() const { return first.size() + second.size(); }
    };
    [[nodiscard]] View view(std::uint64_t offset, std::size_t max) const;

    // view()'s bytes, copied out.
    [[nodiscard]] std::vector<std::uint8_t> copy(std::uint64_t offset, std::size_t max) const;

  private:
    struct Header;

    OutputLog(UniqueFd memfd, std::uint8_t* map, std::size_t capacity, std::uint64_t start,
              std::uint64_t end)
        : memfd_(std::move(memfd)), map_(map), capacity_(capacity), start_(start), end_(end) {}

    static int map(UniqueFd memfd, std::size_t capacity, std::uint64_t start, std::uint64_t end,
                   std::unique_ptr<OutputLog>& out);

    Header& header() const;
    std::uint8_t* ring() const { return map_ + kHeaderSize; }
    // Before writing up to n bytes at end_: the header's start moves past every byte they may
    // overwrite. Then commit(k) for the k <= n bytes that were written.
    void reserve(std::size_t n);
    void commit(std::size_t k);
    void append_chunk(std::span<const std::uint8_t> bytes);  // bytes.size() <= capacity_

    UniqueFd memfd_;
    std::uint8_t* map_;
    std::size_t capacity_;
    std::uint64_t start_;
    std::uint64_t end_;
};

}  // namespace ptyvisor::server
