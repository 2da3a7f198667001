// ClientTransport: one client's socket on the daemon's event loop, for a Connection.
//
// It owns the socket and its io source, reads it into a FrameDecoder, keeps the descriptors
// the client sends, writes the OutputQueue, times a client that stops reading, and sets the
// socket's event mask. What the frames mean, which stage the client is in and what is queued
// is its Handler's (connection.h), which it asks and tells through the Handler alone.
//
// Invariants:
//  - Every descriptor the client sends is owned by a UniqueFd the moment it arrives, and is
//    closed on a worker thread, never on the loop: a client can make close() block. Output
//    waits until refused ones are closed (or kDisposeWait passes), so a client that reads
//    ERROR can count on them being gone; every descriptor still held is closed before the
//    client can see EOF, and the socket itself (which may hold descriptors sent and never
//    read) is closed on a worker too.
//  - No exception leaves a callback of the transport into the loop: one that is thrown goes
//    to Handler::transport_failed(), inside its catch block.
//  - One wakeup reads at most kReadsPerWakeup buffers from the socket; the rest waits for the
//    next turn of the loop, behind every other source that is ready (docs/security.md).
//  - The operation timeout runs from the last byte the client took: a client that takes none
//    for that long while output waits has stalled (Handler::client_stalled).
//  - Memory is bounded: at most one decoder frame, and what the Handler queues.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/event.h"
#include "common/unique_fd.h"
#include "protocol/frame_decoder.h"
#include "server/blocking_worker.h"
#include "server/output_queue.h"

namespace ptyvisor::server {

class ClientTransport {
public:
    // What the transport asks and tells its connection. Every call comes from the loop.
    class Handler {
    public:
        // What of the client's side is watched now.
        enum class Watch {
            Nothing,  // only output is left to send (or the end has been read)
            HangUp,   // a hang-up alone: frames are not read now
            Frames,   // frames, and a hang-up
        };
        [[nodiscard]] virtual Watch watch() const = 0;
        // Whether frames may be read now.
        [[nodiscard]] virtual bool may_read() const = 0;
        // Whether `held` descriptors, all the client has sent so far, may have been sent now.
        [[nodiscard]] virtual bool may_hold_fds(std::size_t held) const = 0;
        // The client sent descriptors that may not be sent; they are kept, and disposed of.
        virtual void fds_refused(const char* why) = 0;
        // Handles the frames in decoder(); false once no more may be read now.
        virtual bool handle_frames() = 0;
        // The client hung up while its frames were not read (`reset`: both ways, not only its
        // writing side).
        virtual void client_hung_up(bool reset) = 0;
        // The client's end was read, after its last frame.
        virtual void client_ended() = 0;
        // The socket failed: the client is gone, and what it did not take is dropped.
        virtual void client_went_away() = 0;
        // Before a flush: queue what may be sent.
        virtual void fill_queue() = 0;
        // The client took everything queued; true when more was queued since.
        virtual bool queue_drained() = 0;
        // The client took nothing for the operation timeout while output waited.
        virtual void client_stalled() = 0;
        // The client did not take its last frame in time (arm_last_frame_timer).
        virtual void last_frame_unread() = 0;
        // The loop could not watch or time the socket: r is a negative errno.
        virtual void event_failed(int r, const char* what) = 0;
        // Called inside a catch block: an exception was thrown by a callback `where`.
        virtual void transport_failed(const char* where) noexcept = 0;

    protected:
        ~Handler() = default;
    };

    ClientTransport(Handler& handler, sd_event* event, BlockingWorker& worker, UniqueFd socket,
                    std::uint64_t operation_timeout_usec);
    ClientTransport(const ClientTransport&) = delete;
    ClientTransport& operator=(const ClientTransport&) = delete;

    // Sizes the socket's buffers and watches it. Returns a negative errno.
    int begin(int buffer_bytes);

    // Reads what the socket holds, up to kReadsPerWakeup buffers, and hands the frames on.
    void receive();
    // Writes the queue (filled first by the handler) as far as the socket takes it.
    void flush();
    // Sets the socket's event mask from the handler's watch() and the queue.
    void update_events();
    // Arms the stall timer, unless it runs already, for a last frame the client must read.
    void arm_last_frame_timer();

    [[nodiscard]] protocol::FrameDecoder& decoder() { return decoder_; }
    [[nodiscard]] OutputQueue& queue() { return out_; }
    // The socket's end has been seen (read, a hang-up, or a failure).
    [[nodiscard]] bool eof() const { return eof_; }

    // Descriptors the client has sent, held until taken or disposed of.
    [[nodiscard]] std::size_t fd_count() const { return fds_.size(); }
    // Takes the first one (a START's working directory).
    UniqueFd take_fd();
    // Closes on a worker what the client sent, after `more` (a START's directory) and with
    // `check` (a check that may still run): output waits until they are closed, or until
    // kDisposeWaitUsec has passed.
    void dispose_fds(std::vector<UniqueFd> more, std::shared_ptr<void> check);

    // Stops watching and timing the socket; output no longer waits.
    void stop();
    // Closes, on a worker, everything the client sent, `more` and `check` (as dispose_fds),
    // and then the socket. After stop().
    void close(std::vector<UniqueFd> more, std::shared_ptr<void> check);

private:
    void on_socket(std::uint32_t revents);
    void release_output();
    template <class F>
    auto guarded(const char* where, F f);

    Handler& handler_;
    sd_event* event_;
    BlockingWorker& worker_;
    UniqueFd socket_;
    std::uint64_t operation_timeout_usec_;
    EventSource socket_source_, stall_timer_, dispose_timer_;
    protocol::FrameDecoder decoder_;
    std::vector<UniqueFd> fds_;  // received, and not yet taken or disposed of
    // While refused descriptors are being closed, output waits (see the invariants).
    std::shared_ptr<BlockingWorker::Completion> fds_disposed_;
    bool output_held_ = false;
    OutputQueue out_;
    bool eof_ = false;
};

}  // namespace ptyvisor::server
