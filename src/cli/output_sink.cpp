#include "cli/output_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace ptyvisor::cli {

namespace {
constexpr int kPipeBytes = 1 << 20;
}  // namespace

OutputSink::OutputSink(int fd) : fd_(fd) {
    struct stat st {};
    if (::fstat(fd, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return;
    // A pipe holds 64 KiB; each time it fills we stop reading the daemon until the reader
    // makes room, one wakeup of each side per 64 KiB. A larger pipe (the most an unprivileged
    // process may ask for without raising /proc/sys/fs/pipe-max-size) cuts those rounds,
    // and costs nothing while the reader keeps up. Best effort: the pipe may be at its
    // owner's limit, and a socket has its own buffer.
    if (S_ISFIFO(st.st_mode) && ::fcntl(fd, F_GETPIPE_SZ) < kPipeBytes) ::fcntl(fd, F_SETPIPE_SZ, kPipeBytes);
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_NONBLOCK) != 0) return;
    if (::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0) restore_flags_ = flags;
}

OutputSink::~OutputSink() {
    if (restore_flags_ >= 0) ::fcntl(fd_, F_SETFL, restore_flags_);
}

void OutputSink::append(std::span<const std::uint8_t> bytes) {
    if (empty()) {
        pending_.clear();
        offset_ = 0;
    }
    pending_.insert(pending_.end(), bytes.begin(), bytes.end());
}

OutputSink::WriteResult OutputSink::write_or_keep(std::span<const std::uint8_t> bytes) {
    if (!empty()) {
        append(bytes);
        return write_some();
    }
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            append(bytes);  // kept, in order, for the next write_some()
            if (errno == EAGAIN || errno == EWOULDBLOCK) return {false, 0};
            return {false, -errno};
        }
        bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
    return {true, 0};
}

OutputSink::WriteResult OutputSink::write_some() {
    while (!empty()) {
        const ssize_t n = ::write(fd_, pending_.data() + offset_, pending_.size() - offset_);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return {false, 0};
            return {false, -errno};
        }
        offset_ += static_cast<std::size_t>(n);
    }
    pending_.clear();
    offset_ = 0;
    return {true, 0};
}

}  // namespace ptyvisor::cli
