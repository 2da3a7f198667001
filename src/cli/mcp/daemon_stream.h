// DaemonStream: one request to ptyvisord on a connection of its own, and the frames the daemon
// sends back, for a caller's poll loop. The resources of `ptyvisor mcp` (session_subscriptions.h)
// speak through it the requests the client library does not know (COMMANDS, WATCH) and LIST.
//
// Invariants:
//   - open() never blocks: the socket is non-blocking from its creation (a daemon whose
//     listen queue is full is an error, not a wait) and the request is queued, then written
//     as the socket takes it.
//   - The socket is the only descriptor held, closed with the stream. Descriptors the daemon
//     might attach are never received (read(2) discards them).
//   - Memory: at most one read buffer and one partial frame, each frame bounded by its type's
//     limit (FrameDecoder); frames are handed out as they complete.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.h"
#include "protocol/frame.h"
#include "protocol/frame_decoder.h"

namespace ptyvisor::cli::mcp {

class DaemonStream {
  public:
    // Connects to `socket_path` and queues `type` with `payload` in protocol `version`.
    // False with `why`.
    bool open(const std::string& socket_path, protocol::FrameType type, std::string_view payload,
              std::uint8_t version, std::string& why);

    [[nodiscard]] int fd() const { return socket_.get(); }
    // The poll events to wait for.
    [[nodiscard]] short events() const;

    // After poll() reported `revents`: writes what is queued, reads what arrived into
    // `frames`. False with `why` when the stream failed (a read or write error, a frame that
    // breaks the protocol). closed() tells when the daemon has closed it.
    bool service(short revents, std::vector<protocol::Frame>& frames, std::string& why);
    [[nodiscard]] bool closed() const { return closed_; }

  private:
    // Writes what the socket takes now of the request.
    void flush();

    UniqueFd socket_;
    std::vector<std::uint8_t> outgoing_;
    protocol::FrameDecoder decoder_;
    bool closed_ = false;
};

}  // namespace ptyvisor::cli::mcp
