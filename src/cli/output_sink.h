// OutputSink: the session's output on its way to our stdout.
//
// Invariants: bytes leave in the order they were appended, each byte once; a pipe or socket
// stdout is made non-blocking for the sink's lifetime and its flags are restored afterwards,
// so a reader that stops reading stalls us (and, through the daemon, the command) instead of
// blocking the event loop. A terminal or regular file stays as it is: writes to those do not
// stall for long, and their file description is usually shared with the user's shell.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ptyvisor::cli {

class OutputSink {
public:
    explicit OutputSink(int fd);  // borrowed
    ~OutputSink();
    OutputSink(const OutputSink&) = delete;
    OutputSink& operator=(const OutputSink&) = delete;

    void append(std::span<const std::uint8_t> bytes);

    // Writes what the descriptor takes now. `error` is 0 or a negative errno (never EAGAIN
    // or EINTR).
    struct WriteResult {
        bool drained = false;
        int error = 0;
    };
    WriteResult write_some();
    // append() and write_some() in one, without copying: when nothing is pending, `bytes` go
    // to the descriptor straight from the caller's buffer, and only what it did not take is
    // kept (the common case under a flood is that it takes everything).
    WriteResult write_or_keep(std::span<const std::uint8_t> bytes);

    [[nodiscard]] bool empty() const { return offset_ == pending_.size(); }
    [[nodiscard]] int fd() const { return fd_; }

private:
    int fd_;
    int restore_flags_ = -1;  // the descriptor's flags before we set O_NONBLOCK, or -1
    std::vector<std::uint8_t> pending_;
    std::size_t offset_ = 0;  // bytes of pending_ already written
};

}  // namespace ptyvisor::cli
