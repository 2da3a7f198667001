// Sending and receiving bytes with SCM_RIGHTS descriptors on a Unix stream socket.
//
// receive_with_fds() cannot leak what a hostile client sends: its ancillary buffer has room
// for SCM_MAX_FD (253) descriptors, every descriptor that one recvmsg installed is owned by a UniqueFd
// before the function looks at anything else, and a truncated message (MSG_CTRUNC) still
// hands back, and so closes, each descriptor the kernel did install.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/unique_fd.h"

namespace ptyvisor::protocol {

struct Received {
    std::size_t bytes = 0;        // payload bytes read into the buffer; 0 with eof
    std::vector<UniqueFd> fds;    // every descriptor this recvmsg installed, close-on-exec
    bool eof = false;             // the peer closed its end
    bool control_truncated = false;  // MSG_CTRUNC: the sender's ancillary data did not fit
    int error = 0;                // -errno of a failed recvmsg (-EAGAIN included); 0 on success
};

Received receive_with_fds(int socket, std::span<std::uint8_t> buffer);

// One sendmsg(2) of `bytes`, with `fd` (when >= 0) attached as SCM_RIGHTS, MSG_NOSIGNAL
// and `flags` added. Returns the bytes sent, or -errno.
long send_once(int socket, std::span<const std::uint8_t> bytes, int fd, int flags = 0);

// Sends all of `bytes` with `fd` attached to the first byte (blocking socket expected).
// Returns 0 or -errno.
//
// The kernel refuses SCM_RIGHTS with ETOOMANYREFS once the sender's account has more
// descriptors in flight (sent, not yet received, on any socket) than the sender's
// RLIMIT_NOFILE soft limit; any process of the same account can get there by stuffing
// sockets nobody reads. So the first send is tried once more with the soft limit raised to
// the hard limit for that one call, which makes such an attacker need the hard limit's
// worth (systemd's default: 524288) instead of 1024.
int send_with_fd(int socket, std::span<const std::uint8_t> bytes, int fd);

}  // namespace ptyvisor::protocol
