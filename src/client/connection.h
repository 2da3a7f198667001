// Connection: the client side of one ptyvisor connection. The one place the client speaks
// the wire protocol.
//
// Use: connect(path), then either start(options) for a session or queue_status_request()
// for a status report. Calls that can fail return false with `why` (client_error.h). After that, with the socket in your event loop:
//   - queue_input / queue_resize / queue_signal / queue_stop append whole frames to an
//     outgoing queue; flush() writes what the socket takes now; wants_write() says whether
//     to wait for writability;
//   - read_events() reads what has arrived and returns it as typed events (events.h).
//
// Invariants:
//   - Once connected, the socket is non-blocking and close-on-exec, and is the only
//     descriptor held.
//   - START is the first frame sent and carries exactly one descriptor: the working
//     directory. No other frame carries one.
//   - Frames leave in the order they were queued; an INPUT never exceeds kMaxIoPayloadSize.
//   - Every frame of a connection carries one version: 4 when its first request needs
//     version 4 (EXEC, COMMANDS, a WAIT for a command, a prompt or input, a START with
//     shell_integration), 5 when the caller asked for it (use_version) or the request needs
//     it (RECORDING), else 3, so that a daemon of version 3 still serves everything it
//     knows. A daemon older than a request's version answers ERROR unsupported_version.
//   - Nothing the daemon sends can crash the client or leak a descriptor: descriptors it
//     sends are closed at once, and anything off-protocol becomes one ProtocolViolation.
//   - Memory: the outgoing queue grows only as the caller queues; callers stop producing
//     when output_full(). Incoming buffering is bounded by one read plus one frame.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/events.h"
#include "client/outgoing_queue.h"
#include "client/start_options.h"
#include "common/unique_fd.h"
#include "protocol/frame_decoder.h"
#include "protocol/payloads.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::client {

class Connection {
public:
    // How many queued bytes make output_full() true: a producer (stdin) pauses above this.
    static constexpr std::size_t kOutgoingLimit = 1024 * 1024;

    // Not connected yet: connect() or adopt() comes first.
    Connection();

    // Connects to the daemon's socket, waiting up to `timeout` for a place in its listen queue
    // (a daemon under a connection flood, or stopped, leaves it full; connect() would wait
    // for ever). False with `why` ("cannot connect to PATH: ...").
    static constexpr std::chrono::milliseconds kConnectTimeout{30000};
    bool connect(const std::string& path, std::string& why, std::chrono::milliseconds timeout = kConnectTimeout);

    // Adopts a connected AF_UNIX stream socket (tests use one end of a socketpair) and makes
    // it non-blocking. False with `why` if the socket is invalid.
    bool adopt(UniqueFd socket, std::string& why);

    Connection(Connection&&) = default;
    Connection& operator=(Connection&&) = default;

    [[nodiscard]] int fd() const { return socket_.get(); }

    // Sends START with the working directory's descriptor attached. Must be the first
    // request. False with `why` when the options are invalid (empty argv, text that is not
    // UTF-8, a malformed env entry, a payload over the limit), the directory cannot be
    // opened or START cannot be sent. If the daemon has already closed the connection, START
    // is dropped and this succeeds: read_events() then reports the daemon's ERROR or Closed.
    bool start(const StartOptions& options, std::string& why);

    // Speaks protocol `version` (at least what the first request needs; 3 to 5) from the first
    // request on. Version 5 makes an attached connection hear who holds the terminal
    // (ControllerChanged) and why its input was not carried out (Refused).
    void use_version(std::uint8_t version);

    // Queues STATUS_REQUEST. Must be the first request.
    void queue_status_request();

    // Version 2. Each must be the first request. ATTACH makes this a session connection
    // (queue_input and the rest apply to a controller); the others get one reply. Each
    // returns false with `why` when its id is not a session id, and queues nothing then.
    bool attach(const protocol::AttachRequest& request, std::string& why);
    void queue_list();
    bool queue_read(const protocol::ReadRequest& request, std::string& why);
    bool queue_wait(const protocol::WaitRequest& request, std::string& why);
    bool queue_kill(const protocol::KillRequest& request, std::string& why);
    // SEND: input for session `id` without attaching; 1 to kMaxIoPayloadSize bytes.
    bool queue_send(const std::string& id, std::span<const std::uint8_t> bytes, std::string& why);
    // Version 3. SNAPSHOT: what session `id`'s terminal shows; the reply is a Screen event.
    bool queue_snapshot(const protocol::SnapshotRequest& request, std::string& why);
    // Version 4. EXEC: run one command line in session `id`'s shell; the reply is an
    // Executed event once it has ended (or waits for input, or timed out). False with `why`
    // for a line EXEC cannot carry (protocol::is_exec_command) or a timeout out of range.
    bool queue_exec(const protocol::ExecRequest& request, std::string& why);
    // COMMANDS: session `id`'s command records; the reply is a CommandList event.
    bool queue_commands(const protocol::CommandsRequest& request, std::string& why);
    // Version 5. CONTROL on an attached connection (a supervisor's): take the terminal from the
    // agent, or hand it back; the daemon answers with a ControllerChanged (or Refused).
    void queue_control(bool take);
    // RECORDING: part of session `id`'s asciicast file; a Cast event, its bytes as Output, then
    // Closed.
    bool queue_recording(const protocol::RecordingRequest& request, std::string& why);
    // DETACH: leave the session this connection started or attached to; it goes on.
    void queue_detach();

    // Session requests; start() must have been called. Input is split into INPUT frames of
    // at most kMaxIoPayloadSize bytes; empty input queues nothing.
    void queue_input(std::span<const std::uint8_t> bytes);
    void queue_input(std::string_view bytes);
    void queue_resize(protocol::WindowSize size);
    // `request.signal` must be 1..64 (std::invalid_argument otherwise).
    void queue_signal(protocol::SignalRequest request);
    void queue_stop();

    // Writes queued frames without blocking. True when the queue is empty afterwards.
    // A write failure (the daemon went away) empties the queue, is kept in write_error()
    // and returns true: what the daemon said last is still to be read with read_events().
    bool flush();
    [[nodiscard]] bool wants_write() const { return !outgoing_.empty(); }
    [[nodiscard]] std::size_t pending_output_bytes() const { return outgoing_.size(); }
    [[nodiscard]] bool output_full() const { return outgoing_.size() >= kOutgoingLimit; }
    // 0, or the negative errno of the write that failed.
    [[nodiscard]] int write_error() const { return write_error_; }

    // Reads once from the socket (non-blocking) and sets `events` to the events it completed;
    // empty when nothing new arrived, and after a Closed or ProtocolViolation event. False
    // with `why` on a read error other than a reset connection.
    bool read_events(std::vector<Event>& events, std::string& why);

    // True once Closed or ProtocolViolation has been reported.
    [[nodiscard]] bool finished() const { return finished_; }

private:
    enum class Mode { Idle, Session, Status, Request };

    void require_session(const char* what) const;
    void queue_frame(protocol::FrameType type, std::string_view payload);
    bool send_start(const std::string& payload, int directory_fd, std::string& why);
    void handle_frame(protocol::Frame& frame, std::vector<Event>& events);
    void handle_reply(protocol::Frame& frame, std::vector<Event>& events);
    void queue_request(protocol::FrameType type, std::string_view payload, std::uint8_t needs_version = 0);
    void violation(std::string message, std::vector<Event>& events);

    UniqueFd socket_;
    Mode mode_ = Mode::Idle;
    OutgoingQueue outgoing_;
    int write_error_ = 0;
    protocol::FrameDecoder decoder_;
    std::vector<std::uint8_t> read_buffer_;
    bool started_ = false;     // STARTED or ATTACHED seen
    protocol::FrameType request_ = protocol::FrameType::Start;  // Mode::Request: what was asked
    bool log_seen_ = false;    // READ: LOG seen (RECORDING: CAST seen), its bytes follow
    bool replied_ = false;     // EXIT, ERROR or STATUS seen: nothing may follow
    std::uint8_t version_ = kVersionBeforeCommands;  // of every frame; fixed by the first request
    static constexpr std::uint8_t kVersionBeforeCommands = 3;
    static constexpr std::uint8_t kCommandsVersion = 4;
    static constexpr std::uint8_t kControlVersion = 5;
    static constexpr std::uint8_t kProfileVersion = 6;
    bool finished_ = false;
};

}  // namespace ptyvisor::client
