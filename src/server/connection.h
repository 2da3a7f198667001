// Connection: one client, from accept to close, on the daemon's event loop.
//
//   Handshake --START ok--> Starting --exec'd--> Running --end--> Ending --EXIT sent--> Closed
//        \--any failure: ERROR frame, then Closed
//
// A START stays in the Handshake phase while a worker thread checks its directory and
// resolves its command (BlockingWorker), and while the backend rechecks a peer it is Unsure
// of; the socket is not read meanwhile, so later frames wait in order. The handshake
// deadline bounds both waits.
//
// Invariants:
//  - Every descriptor the client sends is owned by a UniqueFd the moment it arrives, and is
//    closed on a worker thread, never on the loop: a client can make close() block. Output
//    waits until refused ones are closed (or kDisposeWait passes), so a client that reads
//    ERROR can count on them being gone; the peer's pidfd and every descriptor still held
//    are closed before the client can see EOF, and the socket itself (which may hold
//    descriptors sent and never read) is closed on a worker too.
//  - No exception leaves a handler of this connection: one that is thrown ends this
//    connection with ERROR internal, never the daemon.
//  - The session is cleaned up exactly once (backend stop), under a deadline of its own.
//  - All OUTPUT precedes EXIT; EXIT and ERROR are the last frames and are followed by close.
//  - Memory is bounded: at most one decoder frame, held_input_bytes of INPUT and
//    output_buffer_bytes (+ one read) of OUTPUT per connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/event.h"
#include "common/unique_fd.h"
#include "protocol/frame_decoder.h"
#include "protocol/payloads.h"
#include "server/blocking_worker.h"
#include "server/output_queue.h"
#include "server/peer.h"

namespace ptyvisor::server {

class Server;

struct SessionStatus {
    std::string unit;
    pid_t pid = 0;
    pid_t peer_pid = 0;
    std::int64_t started_at = 0;  // unix seconds
    std::uint64_t bytes_in = 0;
    std::uint64_t bytes_out = 0;
    std::string argv0;
};

class Connection {
public:
    enum class Phase { Handshake, Starting, Running, Ending, Closed };

    Connection(Server& server, UniqueFd socket, PeerIdentity peer);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // Registers event sources and the handshake deadline. Returns a negative errno.
    int begin();

    // The daemon is stopping: a handshake gets ERROR shutting_down, a session ends with
    // reason shutdown.
    void shut_down();
    // Admission took this handshake's slot for a fairer peer.
    void evict();
    // Closes at once, without cleanup callbacks (fail-closed path).
    void abandon();

    [[nodiscard]] Phase phase() const { return phase_; }
    [[nodiscard]] pid_t peer_pid() const { return peer_.cred.pid; }
    [[nodiscard]] std::uint64_t serial() const { return serial_; }
    [[nodiscard]] bool has_session() const { return session_ != nullptr; }
    [[nodiscard]] SessionStatus status() const;

private:
    // Handshake.
    void on_socket(std::uint32_t revents);
    void receive();
    void handle_frame(protocol::Frame& frame);
    bool handle_decoded_frames();
    void handle_start(const protocol::Frame& frame);
    void on_start_checked();
    void authorize_start(bool rechecked);
    void on_peer_rechecked();
    // Waiting for a worker's or the backend's answer about the START: only a hang-up is read.
    [[nodiscard]] bool awaiting_answer() const { return peer_recheck_ || start_checked_; }
    void handle_status_request();
    void start_session();
    void on_started(pid_t pid);
    void on_start_failed(const std::string& why);
    void on_handshake_timeout();

    // Relay.
    void handle_input(const protocol::Frame& frame);
    void on_pty(std::uint32_t revents);
    void read_pty();
    void write_held_input();
    void flush_output();
    void update_socket_events();
    void update_pty_events();
    void on_stalled();

    // End.
    void on_exited(protocol::ExitStatus status);
    void end(protocol::ExitReason reason);
    void stop_session();
    void on_stopped(bool ok, const std::string& why);
    void start_drain_timer();
    void maybe_finish();
    void send_error(protocol::ErrorCode code, const std::string& message);
    void close();
    void leave_handshake();

    // Client descriptors.
    void keep_client_fds(std::vector<UniqueFd>& fds);
    void dispose_client_fds();
    void release_output();

    // Every handler of this connection runs through guarded(): an exception ends the
    // connection (on_exception), and goes no further.
    template <class F>
    auto guarded(const char* where, F f);
    void on_exception(const char* where) noexcept;
    Server& server_;
    UniqueFd socket_;
    PeerIdentity peer_;
    std::uint64_t serial_;
    Phase phase_ = Phase::Handshake;
    bool holds_handshake_slot_ = true;
    bool holds_session_slot_ = false;

    protocol::FrameDecoder decoder_;
    std::vector<UniqueFd> start_fds_;  // received before START was handled
    // The START being prepared: its directory (held until backend start() returns), the
    // session it describes, and while a worker checks it, the check and its completion.
    struct StartCheck;
    UniqueFd cwd_;
    std::optional<backends::SessionSpec> spec_;
    protocol::WindowSize size_;
    std::shared_ptr<StartCheck> start_check_;
    std::shared_ptr<BlockingWorker::Completion> start_checked_;
    // While the backend rechecks the peer.
    std::shared_ptr<std::function<void()>> peer_recheck_;
    // While refused descriptors are being closed, output waits (see the invariants).
    std::shared_ptr<BlockingWorker::Completion> fds_disposed_;
    bool output_held_ = false;
    OutputQueue out_;
    std::vector<std::uint8_t> held_input_;
    bool socket_eof_ = false;

    EventSource socket_source_, pty_source_, handshake_timer_, stall_timer_, drain_timer_, dispose_timer_;

    UniqueFd master_;
    std::unique_ptr<backends::Session> session_;
    std::string argv0_;
    std::int64_t started_at_ = 0;
    std::uint64_t bytes_in_ = 0, bytes_out_ = 0;

    // Ending state.
    bool ending_ = false;
    protocol::ExitReason reason_ = protocol::ExitReason::Exited;
    bool exited_ = false;
    protocol::ExitStatus exit_status_;
    bool stop_requested_ = false, stopped_ = false, pty_closed_ = false, drain_expired_ = false;
    bool exit_queued_ = false;
    bool close_after_stop_ = false;
    bool started_ = false;  // STARTED is queued: output may follow
    bool stop_after_start_ = false;  // STOP arrived before the command had started
};

}  // namespace ptyvisor::server
