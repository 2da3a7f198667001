#include "server/client_transport.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <span>

#include "protocol/fd_passing.h"

namespace ptyvisor::server {

namespace {

// How long output waits for refused descriptors to be closed. Closing takes microseconds,
// unless the client made it block; then the ERROR goes out anyway.
constexpr std::uint64_t kDisposeWaitUsec = 100'000;
// Socket reads per wakeup (each up to a frame's worth): a client that writes as fast as it
// can is served in turns, like every other source, instead of for as long as it writes.
constexpr int kReadsPerWakeup = 4;

}  // namespace

template <class F>
auto ClientTransport::guarded(const char* where, F f) {
    return [this, where, f = std::move(f)](auto&&... args) {
        try {
            f(std::forward<decltype(args)>(args)...);
        } catch (...) {
            handler_.transport_failed(where);
        }
    };
}

ClientTransport::ClientTransport(Handler& handler, sd_event* event, BlockingWorker& worker,
                                 UniqueFd socket, std::uint64_t operation_timeout_usec)
    : handler_(handler),
      event_(event),
      worker_(worker),
      socket_(std::move(socket)),
      operation_timeout_usec_(operation_timeout_usec) {}

int ClientTransport::begin(int buffer_bytes) {
    ::setsockopt(socket_.get(), SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
    ::setsockopt(socket_.get(), SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
    return add_io(event_, socket_source_, socket_.get(), EPOLLIN | EPOLLRDHUP,
                  guarded("socket", [this](std::uint32_t revents) { on_socket(revents); }));
}

// ---- Reading the client ------------------------------------------------------------------

void ClientTransport::on_socket(std::uint32_t revents) {
    if (revents & EPOLLOUT) flush();
    if (!socket_) return;
    const bool hangup = (revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
    if (!handler_.may_read()) {
        // Not reading, but a hang-up is still news: what it means is the handler's.
        if (hangup) {
            eof_ = true;
            handler_.client_hung_up((revents & (EPOLLHUP | EPOLLERR)) != 0);
        }
        return;
    }
    if ((revents & EPOLLIN) || hangup) receive();
}

void ClientTransport::receive() {
    std::uint8_t buffer[protocol::kHeaderSize + protocol::kMaxIoPayloadSize];
    for (int reads = 0; socket_ && handler_.may_read() && reads < kReadsPerWakeup; ++reads) {
        auto got = protocol::receive_with_fds(socket_.get(), buffer);
        if (got.error == -EAGAIN || got.error == -EINTR) break;
        if (got.error != 0) {
            eof_ = true;
            break;
        }
        // Every descriptor is kept until it is disposed of or taken: none is closed here, on
        // the loop.
        const bool fds_allowed =
            got.fds.empty() || handler_.may_hold_fds(fds_.size() + got.fds.size());
        for (auto& fd : got.fds) fds_.push_back(std::move(fd));
        got.fds.clear();
        if (got.control_truncated) return handler_.fds_refused("ancillary data was truncated");
        if (!fds_allowed)
            return handler_.fds_refused("exactly one descriptor may be sent, and only with START");
        if (got.eof) {
            eof_ = true;
            break;
        }
        decoder_.feed(std::span(buffer, got.bytes));
        if (!handler_.handle_frames()) return update_events();
    }
    if (eof_ && socket_) handler_.client_ended();
    update_events();
}

UniqueFd ClientTransport::take_fd() {
    UniqueFd fd;
    if (!fds_.empty()) {
        fd = std::move(fds_.front());
        fds_.clear();
    }
    return fd;
}

// ---- Writing the client ------------------------------------------------------------------

void ClientTransport::flush() {
    if (!socket_ || output_held_) return;
    handler_.fill_queue();
    for (;;) {
        bool progress = false;
        switch (out_.flush(socket_.get(), progress)) {
            case OutputQueue::Flush::Drained:
                stall_timer_.reset();
                if (handler_.queue_drained()) continue;
                break;
            case OutputQueue::Flush::Blocked:
                // The operation timeout runs from the last byte the client took.
                if (progress || !stall_timer_) {
                    const int r = rearm_timer(event_, stall_timer_, operation_timeout_usec_,
                                              guarded("stall timer", [this] { handler_.client_stalled(); }));
                    // A client that could stall unbounded is not served.
                    if (r < 0) return handler_.event_failed(r, "cannot arm the stall timer");
                }
                break;
            case OutputQueue::Flush::Failed:
                // The client is gone: what it did not take is dropped, and nothing more is sent.
                out_ = OutputQueue();
                eof_ = true;
                return handler_.client_went_away();
        }
        break;
    }
    update_events();
}

void ClientTransport::update_events() {
    if (!socket_source_ || !socket_) return;
    std::uint32_t events = 0;
    switch (handler_.watch()) {
        case Handler::Watch::Nothing: break;
        case Handler::Watch::HangUp: events |= EPOLLRDHUP; break;
        case Handler::Watch::Frames: events |= EPOLLRDHUP | EPOLLIN; break;
    }
    if (!out_.empty()) events |= EPOLLOUT;
    if (const int r = set_io_events(socket_source_, events); r < 0)
        handler_.event_failed(r, "cannot watch the socket");
}

void ClientTransport::arm_last_frame_timer() {
    if (!socket_ || stall_timer_) return;
    const int r = rearm_timer(event_, stall_timer_, operation_timeout_usec_,
                              guarded("error timer", [this] { handler_.last_frame_unread(); }));
    if (r < 0) handler_.event_failed(r, "cannot arm the error timer");
}

// ---- Client descriptors and the end -------------------------------------------------------

void ClientTransport::dispose_fds(std::vector<UniqueFd> more, std::shared_ptr<void> check) {
    for (auto& fd : fds_) more.push_back(std::move(fd));
    fds_.clear();
    if (more.empty() && !check) return;
    auto fds = std::make_shared<std::vector<UniqueFd>>(std::move(more));
    // Output waits until they are closed, or until kDisposeWaitUsec has passed.
    output_held_ = true;
    fds_disposed_ = std::make_shared<BlockingWorker::Completion>(
        guarded("descriptors closed", [this] { release_output(); }));
    worker_.submit([fds, check = std::move(check)]() mutable {
        fds->clear();
        check.reset();
    }, fds_disposed_);
    // Without the timer, output would wait for the worker alone: send it now instead.
    if (add_timer(event_, dispose_timer_, kDisposeWaitUsec,
                  guarded("dispose timer", [this] { release_output(); })) < 0)
        release_output();
}

void ClientTransport::release_output() {
    fds_disposed_.reset();
    dispose_timer_.reset();
    if (!output_held_) return;
    output_held_ = false;
    flush();
}

void ClientTransport::stop() {
    socket_source_.reset();
    stall_timer_.reset();
    dispose_timer_.reset();
    fds_disposed_.reset();
    output_held_ = false;
}

void ClientTransport::close(std::vector<UniqueFd> more, std::shared_ptr<void> check) {
    // Everything that came from the client goes before it can see EOF, so that a client that
    // has seen it knows the daemon holds nothing of its own; then the socket, whose queue
    // may hold descriptors sent and never read. All of it on a worker: any close can block.
    for (auto& fd : fds_) more.push_back(std::move(fd));
    fds_.clear();
    auto fds = std::make_shared<std::vector<UniqueFd>>(std::move(more));
    auto socket = std::make_shared<UniqueFd>(std::move(socket_));
    worker_.submit([fds, socket, check = std::move(check)]() mutable {
        fds->clear();
        check.reset();
        if (*socket) ::shutdown(socket->get(), SHUT_RDWR);
        socket->reset();
    });
    eof_ = true;
}

}  // namespace ptyvisor::server
