#include "client/connection.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "client/client_error.h"
#include "common/utf8.h"
#include "protocol/fd_passing.h"
#include "protocol/frame.h"

namespace ptyvisor::client {
namespace {

using protocol::FrameType;

// One read takes at most one maximal I/O frame: output reaches the caller promptly and the
// decoder never holds more than one read plus one partial frame.
constexpr std::size_t kReadBufferSize = protocol::kHeaderSize + protocol::kMaxIoPayloadSize;

// Returns 0 or a negative errno.
int set_nonblocking(int fd, bool on) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0) return -errno;
    const int wanted = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
    if (wanted != flags && ::fcntl(fd, F_SETFL, wanted) < 0) return -errno;
    return 0;
}

bool fail(std::string& why, std::string message) {
    why = std::move(message);
    return false;
}

// Waits up to `timeout_ms` for a connect() interrupted by a signal to finish. Returns its
// result: 0 or a negative errno (-ETIMEDOUT when it did not finish in time).
int finish_interrupted_connect(int fd, int timeout_ms) {
    pollfd p{fd, POLLOUT, 0};
    for (;;) {
        const int n = ::poll(&p, 1, timeout_ms);
        if (n > 0) break;
        if (n == 0) return -ETIMEDOUT;
        if (errno != EINTR) return -errno;
    }
    int error = 0;
    socklen_t len = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0) return -errno;
    return -error;
}

// Control payloads are JSON, whose strings are Unicode: bytes that are not valid UTF-8 cannot
// be carried faithfully, so they are refused here rather than replaced by U+FFFD unseen.
bool check_utf8(std::string_view text, const std::string& what, std::string& why) {
    return utf8::is_valid(text) || fail(why, what + " is not valid UTF-8");
}

bool validate(const StartOptions& o, std::string& why) {
    if (o.argv.empty() || o.argv[0].empty()) return fail(why, "no command given");
    if (o.argv.size() > protocol::kMaxArgc)
        return fail(why, "too many arguments (limit " + std::to_string(protocol::kMaxArgc) + ")");
    if (o.env.size() > protocol::kMaxEnvc)
        return fail(why, "too many environment variables (limit " + std::to_string(protocol::kMaxEnvc) + ")");
    for (std::size_t i = 0; i < o.argv.size(); ++i) {
        if (!check_utf8(o.argv[i], "argument " + std::to_string(i), why)) return false;
        if (o.argv[i].find('\0') != std::string::npos)
            return fail(why, "argument " + std::to_string(i) + " contains a NUL byte");
    }
    for (const auto& e : o.env) {
        const auto eq = e.find('=');
        const std::string name = e.substr(0, eq);
        if (eq == std::string::npos || eq == 0) return fail(why, "environment entry '" + e + "' is not NAME=VALUE");
        if (!check_utf8(e, "environment variable " + name, why)) return false;
        if (e.find('\0') != std::string::npos) return fail(why, "environment variable " + name + " contains a NUL byte");
    }
    if (!check_utf8(o.term, "TERM", why)) return false;
    if (o.term.size() > protocol::kMaxTermLength || o.term.find('\0') != std::string::npos)
        return fail(why, "TERM is too long or contains a NUL byte");
    if (o.size.rows == 0 || o.size.cols == 0) return fail(why, "the terminal size must be at least 1x1");
    return true;
}

// The directory descriptor START carries: the caller's (`opened` stays empty), or cwd opened
// here into `opened`. False with `why`.
bool open_directory(const StartOptions& o, UniqueFd& opened, int& fd, std::string& why) {
    if (o.cwd_fd >= 0) {
        fd = o.cwd_fd;
        return true;
    }
    opened.reset(::open(o.cwd.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!opened) return fail(why, errno_message("cannot open directory " + o.cwd.string(), errno));
    fd = opened.get();
    return true;
}

}  // namespace

std::string errno_message(const std::string& what, int error) {
    return what + ": " + std::strerror(error < 0 ? -error : error);
}

Connection::Connection() : read_buffer_(kReadBufferSize) {}

bool Connection::connect(const std::string& path, std::string& why, std::chrono::milliseconds timeout) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof addr.sun_path)
        return fail(why, "cannot connect to " + path + ": invalid socket path");
    std::memcpy(addr.sun_path, path.data(), path.size());

    // Connect blocking so a full listen backlog waits instead of failing with EAGAIN; for at
    // most `timeout` (SO_SNDTIMEO bounds a Unix socket's connect()), then EAGAIN.
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return fail(why, errno_message("cannot create a socket", errno));
    const auto ms = timeout.count() > 0 ? timeout.count() : 1;
    const timeval limit{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit) < 0)
        return fail(why, errno_message("cannot set the connect timeout", errno));
    int r = 0;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) < 0)
        r = errno == EINTR ? finish_interrupted_connect(fd.get(), static_cast<int>(ms)) : -errno;
    if (r == -EAGAIN || r == -ETIMEDOUT)
        return fail(why, "cannot connect to " + path + ": the daemon accepted no connection in " +
                             std::to_string((ms + 999) / 1000) + " s (its queue of connections is full)");
    if (r < 0) return fail(why, errno_message("cannot connect to " + path, r));
    const timeval none{};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
    return adopt(std::move(fd), why);
}

bool Connection::adopt(UniqueFd socket, std::string& why) {
    if (socket_) throw std::logic_error("ptyvisor: the connection already has a socket");
    if (!socket) return fail(why, "invalid socket");
    if (const int r = set_nonblocking(socket.get(), true); r < 0)
        return fail(why, errno_message("cannot make the socket non-blocking", r));
    socket_ = std::move(socket);
    return true;
}

bool Connection::start(const StartOptions& options, std::string& why) {
    if (!socket_) throw std::logic_error("ptyvisor: START before the connection is made");
    if (mode_ != Mode::Idle) throw std::logic_error("ptyvisor: START must be the first request");
    if (!validate(options, why)) return false;
    UniqueFd opened;
    int dir_fd = -1;
    if (!open_directory(options, opened, dir_fd, why)) return false;
    struct stat st {};
    if (::fstat(dir_fd, &st) < 0) return fail(why, errno_message("cannot stat the working directory", errno));
    if (!S_ISDIR(st.st_mode)) return fail(why, "the working directory is not a directory");

    protocol::StartRequest request;
    request.argv = options.argv;
    request.env = options.env;
    request.cwd_dev = st.st_dev;
    request.cwd_ino = st.st_ino;
    request.term = options.term;
    request.size = options.size;
    request.detach = options.detach;
    request.terminal = options.terminal;
    request.shell_integration = options.shell_integration;
    request.profile = options.profile;
    const std::string payload = protocol::encode(request);
    if (payload.size() > protocol::max_payload(FrameType::Start))
        return fail(why, "the command line and environment are too large (" + std::to_string(payload.size()) +
                             " bytes encoded, limit " + std::to_string(protocol::max_payload(FrameType::Start)) +
                             ")");
    mode_ = Mode::Session;
    if (options.shell_integration) version_ = std::max(version_, kCommandsVersion);
    if (!options.profile.empty()) version_ = std::max(version_, kProfileVersion);
    return send_start(payload, dir_fd, why);
}

bool Connection::send_start(const std::string& payload, int directory_fd, std::string& why) {
    const auto frame = protocol::encode_frame(FrameType::Start, payload, version_);
    // send_with_fd needs a blocking socket to send the whole frame; START is the first
    // frame, so nothing else is waiting and blocking here only waits for the daemon to read.
    if (const int r = set_nonblocking(socket_.get(), false); r < 0)
        return fail(why, errno_message("cannot make the socket blocking to send START", r));
    const int error = protocol::send_with_fd(socket_.get(), frame, directory_fd);
    if (const int r = set_nonblocking(socket_.get(), true); r < 0)
        return fail(why, errno_message("cannot make the socket non-blocking", r));
    if (error == -EPIPE || error == -ECONNRESET) {
        write_error_ = error;  // the daemon's ERROR, if any, is still to be read
        return true;
    }
    if (error == -ETOOMANYREFS)
        return fail(why, "cannot pass the working directory to ptyvisord: the kernel refused "
                         "(ETOOMANYREFS), because this account has more descriptors in flight "
                         "than its file limit allows; another of its processes is holding "
                         "sockets full of descriptors nobody has received");
    if (error != 0) return fail(why, errno_message("cannot send START", error));
    return true;
}

void Connection::queue_status_request() {
    if (!socket_) throw std::logic_error("ptyvisor: STATUS_REQUEST before the connection is made");
    if (mode_ != Mode::Idle)
        throw std::logic_error("ptyvisor: STATUS_REQUEST must be the first request");
    mode_ = Mode::Status;
    queue_frame(FrameType::StatusRequest, {});
}

namespace {

bool valid_id(const std::string& id, std::string& why) {
    if (protocol::is_session_id(id)) return true;
    why = "not a session id (32 lowercase hex digits): " + id;
    return false;
}

}  // namespace

bool Connection::attach(const protocol::AttachRequest& request, std::string& why) {
    if (mode_ != Mode::Idle) throw std::logic_error("ptyvisor: ATTACH must be the first request");
    if (!valid_id(request.id, why)) return false;
    mode_ = Mode::Session;
    queue_frame(FrameType::Attach, protocol::encode(request));
    return true;
}

void Connection::use_version(std::uint8_t version) {
    if (mode_ != Mode::Idle) throw std::logic_error("ptyvisor: the version is chosen before the first request");
    if (version < kVersionBeforeCommands || version > protocol::kVersion)
        throw std::invalid_argument("ptyvisor: no such protocol version");
    version_ = version;
}

void Connection::queue_control(bool take) {
    require_session("CONTROL");
    if (version_ < kControlVersion) throw std::logic_error("ptyvisor: CONTROL needs protocol version 5 (use_version)");
    queue_frame(FrameType::Control, protocol::encode(protocol::ControlRequest{take}));
}

bool Connection::queue_recording(const protocol::RecordingRequest& request, std::string& why) {
    if (!valid_id(request.id, why)) return false;
    queue_request(FrameType::Recording, protocol::encode(request), kControlVersion);
    return true;
}

void Connection::queue_request(FrameType type, std::string_view payload, std::uint8_t needs_version) {
    if (mode_ != Mode::Idle) throw std::logic_error("ptyvisor: a request must be the first one");
    mode_ = Mode::Request;
    version_ = std::max(version_, needs_version);
    request_ = type;
    queue_frame(type, payload);
}

void Connection::queue_list() { queue_request(FrameType::List, {}); }

bool Connection::queue_read(const protocol::ReadRequest& request, std::string& why) {
    if (!valid_id(request.id, why)) return false;
    queue_request(FrameType::Read, protocol::encode(request));
    return true;
}

bool Connection::queue_wait(const protocol::WaitRequest& request, std::string& why) {
    if (!valid_id(request.id, why)) return false;
    using For = protocol::WaitRequest::For;
    const bool needs_version4 = request.what == For::Command || request.what == For::Prompt || request.what == For::Input;
    queue_request(FrameType::Wait, protocol::encode(request), needs_version4 ? kCommandsVersion : 0);
    return true;
}

bool Connection::queue_kill(const protocol::KillRequest& request, std::string& why) {
    if (!valid_id(request.id, why)) return false;
    queue_request(FrameType::Kill, protocol::encode(request));
    return true;
}

bool Connection::queue_send(const std::string& id, std::span<const std::uint8_t> bytes, std::string& why) {
    if (!valid_id(id, why)) return false;
    if (bytes.empty() || bytes.size() > protocol::kMaxIoPayloadSize) {
        why = "SEND takes 1 to " + std::to_string(protocol::kMaxIoPayloadSize) + " bytes";
        return false;
    }
    const auto payload = protocol::encode_send(id, bytes);
    queue_request(FrameType::Send, std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()));
    return true;
}

bool Connection::queue_snapshot(const protocol::SnapshotRequest& request, std::string& why) {
    if (!valid_id(request.id, why)) return false;
    if (request.scrollback > protocol::kMaxScrollbackLines) {
        why = "a snapshot's scrollback is at most " + std::to_string(protocol::kMaxScrollbackLines) + " lines";
        return false;
    }
    queue_request(FrameType::Snapshot, protocol::encode(request));
    return true;
}

bool Connection::queue_exec(const protocol::ExecRequest& request, std::string& why) {
    if (!valid_id(request.id, why) || !protocol::is_exec_command(request.command, why)) return false;
    if (request.timeout_ms < 1 || request.timeout_ms > protocol::kMaxWaitMs) {
        why = "EXEC's timeout is 1 to " + std::to_string(protocol::kMaxWaitMs) + " ms";
        return false;
    }
    queue_request(FrameType::Exec, protocol::encode(request), kCommandsVersion);
    return true;
}

bool Connection::queue_commands(const protocol::CommandsRequest& request, std::string& why) {
    if (!valid_id(request.id, why)) return false;
    queue_request(FrameType::Commands, protocol::encode(request), kCommandsVersion);
    return true;
}

void Connection::queue_detach() {
    require_session("DETACH");
    queue_frame(FrameType::Detach, {});
}

void Connection::require_session(const char* what) const {
    if (mode_ != Mode::Session)
        throw std::logic_error(std::string("ptyvisor: ") + what + " before START");
}

void Connection::queue_frame(FrameType type, std::string_view payload) {
    // After a failed write nobody reads: keep nothing.
    if (write_error_ != 0) return;
    outgoing_.push(protocol::encode_frame(type, payload, version_));
}

void Connection::queue_input(std::span<const std::uint8_t> bytes) {
    require_session("INPUT");
    while (!bytes.empty()) {
        const auto n = std::min<std::size_t>(bytes.size(), protocol::kMaxIoPayloadSize);
        if (write_error_ == 0) outgoing_.push(protocol::encode_frame(FrameType::Input, bytes.first(n), version_));
        bytes = bytes.subspan(n);
    }
}

void Connection::queue_input(std::string_view bytes) {
    queue_input(std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
}

void Connection::queue_resize(protocol::WindowSize size) {
    require_session("RESIZE");
    if (size.rows == 0 || size.cols == 0) return;  // not a size a terminal can have
    queue_frame(FrameType::Resize, protocol::encode(size));
}

void Connection::queue_signal(protocol::SignalRequest request) {
    require_session("SIGNAL");
    if (request.signal < 1 || request.signal > 64)
        throw std::invalid_argument("ptyvisor: signal " + std::to_string(request.signal) + " is out of range");
    queue_frame(FrameType::Signal, protocol::encode(request));
}

void Connection::queue_stop() {
    require_session("STOP");
    queue_frame(FrameType::Stop, {});
}

bool Connection::flush() {
    if (write_error_ != 0) return true;
    const auto result = outgoing_.flush(socket_.get());
    if (result.error != 0) {
        write_error_ = result.error;
        outgoing_.clear();
        return true;
    }
    return result.drained;
}

void Connection::violation(std::string message, std::vector<Event>& events) {
    events.emplace_back(ProtocolViolation{std::move(message)});
    finished_ = true;
}

bool Connection::read_events(std::vector<Event>& events, std::string& why) {
    events.clear();
    if (finished_) return true;
    const auto r = protocol::receive_with_fds(socket_.get(), read_buffer_);
    if (r.error == -EAGAIN || r.error == -EWOULDBLOCK || r.error == -EINTR) return true;
    // A Unix stream socket reports ECONNRESET instead of end of file when the daemon closed
    // with our frames unread in its queue (after an ERROR, say). Everything it sent before
    // closing has been read by then, so this is the end of the stream like any other.
    const bool eof = r.eof || r.error == -ECONNRESET;
    if (r.error != 0 && !eof) return fail(why, errno_message("cannot read from the daemon", r.error));
    // r.fds closes every received descriptor when r goes out of scope.
    if (!r.fds.empty() || r.control_truncated) {
        violation("the daemon sent file descriptors", events);
        return true;
    }
    decoder_.feed(std::span<const std::uint8_t>(read_buffer_.data(), r.bytes));
    protocol::Frame frame;
    while (!finished_) {
        const auto status = decoder_.next(frame);
        if (status == protocol::FrameDecoder::Status::NeedMore) break;
        if (status == protocol::FrameDecoder::Status::Failed) {
            violation("bad frame from the daemon (" + std::string(protocol::to_string(decoder_.error())) + ")",
                      events);
            break;
        }
        handle_frame(frame, events);
    }
    if (eof && !finished_) {
        if (decoder_.mid_frame())
            violation("the daemon closed the connection in the middle of a frame", events);
        else
            events.emplace_back(Closed{});
        finished_ = true;
    }
    return true;
}

// The reply to a version 2 request: it must answer what was asked.
void Connection::handle_reply(protocol::Frame& frame, std::vector<Event>& events) {
    const std::string name(protocol::to_string(frame.type));
    const auto expected = request_ == FrameType::List   ? FrameType::Sessions
                          : request_ == FrameType::Read ? FrameType::Log
                          : request_ == FrameType::Wait ? FrameType::Waited
                          : request_ == FrameType::Kill ? FrameType::Killed
                          : request_ == FrameType::Send ? FrameType::Sent
                          : request_ == FrameType::Snapshot ? FrameType::Screen
                          : request_ == FrameType::Exec ? FrameType::Executed
                          : request_ == FrameType::Commands ? FrameType::CommandList
                          : request_ == FrameType::Recording ? FrameType::Cast
                                                        : FrameType::Start;
    if (mode_ != Mode::Request || frame.type != expected || log_seen_)
        return violation("the daemon sent an unexpected " + name + " frame", events);
    const auto bad = [&](const std::string& why) { violation("bad " + name + " payload: " + why, events); };
    switch (frame.type) {
        case FrameType::Sessions: {
            auto d = protocol::decode_sessions_reply(frame.text());
            if (!d) return bad(d.error);
            events.emplace_back(Sessions{std::move(d.value->sessions), d.value->role.value_or("")});
            break;
        }
        case FrameType::Cast: {
            auto d = protocol::decode_cast(frame.text());
            if (!d) return bad(d.error);
            log_seen_ = true;  // its bytes follow, then the close
            events.emplace_back(Cast{std::move(*d.value)});
            return;
        }
        case FrameType::Log: {
            auto d = protocol::decode_log(frame.text());
            if (!d) return bad(d.error);
            log_seen_ = true;  // its bytes follow, then the close
            events.emplace_back(Log{std::move(*d.value)});
            return;
        }
        case FrameType::Waited: {
            auto d = protocol::decode_waited(frame.text());
            if (!d) return bad(d.error);
            events.emplace_back(Waited{std::move(*d.value)});
            break;
        }
        case FrameType::Killed: {
            auto d = protocol::decode_killed(frame.text());
            if (!d) return bad(d.error);
            events.emplace_back(Killed{std::move(*d.value)});
            break;
        }
        case FrameType::Sent: {
            auto d = protocol::decode_sent(frame.text());
            if (!d) return bad(d.error);
            events.emplace_back(Sent{*d.value});
            break;
        }
        case FrameType::Screen: {
            auto d = protocol::decode_screen(frame.text());
            if (!d) return bad(d.error);
            events.emplace_back(Screen{std::move(*d.value), std::string(frame.text())});
            break;
        }
        case FrameType::Executed: {
            auto d = protocol::decode_executed(frame.text());
            if (!d) return bad(d.error);
            events.emplace_back(Executed{std::move(*d.value)});
            break;
        }
        case FrameType::CommandList: {
            auto d = protocol::decode_command_list(frame.text());
            if (!d) return bad(d.error);
            events.emplace_back(CommandList{std::move(*d.value)});
            break;
        }
        default: return;
    }
    replied_ = true;
}

void Connection::handle_frame(protocol::Frame& frame, std::vector<Event>& events) {
    const std::string name(protocol::to_string(frame.type));
    if (replied_) return violation("the daemon sent " + name + " after its last frame", events);
    switch (frame.type) {
        case FrameType::Error: {
            auto d = protocol::decode_error(frame.text());
            if (!d) return violation("bad ERROR payload: " + d.error, events);
            replied_ = true;
            events.emplace_back(Error{std::move(*d.value)});
            return;
        }
        case FrameType::Started: {
            if (mode_ != Mode::Session || started_) break;
            auto d = protocol::decode_started(frame.text());
            if (!d) return violation("bad STARTED payload: " + d.error, events);
            started_ = true;
            events.emplace_back(Started{std::move(d.value->unit), d.value->pid, std::move(d.value->id)});
            return;
        }
        case FrameType::Attached: {
            if (mode_ != Mode::Session || started_) break;
            auto d = protocol::decode_attached(frame.text());
            if (!d) return violation("bad ATTACHED payload: " + d.error, events);
            started_ = true;
            events.emplace_back(Attached{std::move(*d.value)});
            return;
        }
        case FrameType::Output:
            if (mode_ == Mode::Request && (request_ == FrameType::Read || request_ == FrameType::Recording) && log_seen_) {
                events.emplace_back(Output{std::move(frame.payload)});
                return;
            }
            if (mode_ != Mode::Session || !started_) break;
            events.emplace_back(Output{std::move(frame.payload)});
            return;
        case FrameType::Dropped: {
            if (mode_ != Mode::Session || !started_) break;
            auto d = protocol::decode_dropped(frame.text());
            if (!d) return violation("bad DROPPED payload: " + d.error, events);
            events.emplace_back(Dropped{*d.value});
            return;
        }
        case FrameType::Controller: {
            if (mode_ != Mode::Session || !started_) break;
            auto d = protocol::decode_controller(frame.text());
            if (!d) return violation("bad CONTROLLER payload: " + d.error, events);
            events.emplace_back(ControllerChanged{*d.value});
            return;
        }
        case FrameType::Refused: {
            if (mode_ != Mode::Session || !started_) break;
            auto d = protocol::decode_refused(frame.text());
            if (!d) return violation("bad REFUSED payload: " + d.error, events);
            events.emplace_back(Refused{std::move(*d.value)});
            return;
        }
        case FrameType::Detached: {
            if (mode_ != Mode::Session) break;
            auto d = protocol::decode_detached(frame.text());
            if (!d) return violation("bad DETACHED payload: " + d.error, events);
            replied_ = true;
            events.emplace_back(Detached{std::move(*d.value)});
            return;
        }
        case FrameType::Sessions:
        case FrameType::Log:
        case FrameType::Waited:
        case FrameType::Killed:
        case FrameType::Sent:
        case FrameType::Screen:
        case FrameType::Executed:
        case FrameType::CommandList:
        case FrameType::Cast: return handle_reply(frame, events);
        case FrameType::Exit: {
            if (mode_ != Mode::Session || !started_) break;
            auto d = protocol::decode_exit(frame.text());
            if (!d) return violation("bad EXIT payload: " + d.error, events);
            replied_ = true;
            events.emplace_back(Exit{std::move(*d.value)});
            return;
        }
        case FrameType::Status: {
            if (mode_ != Mode::Status) break;
            auto d = protocol::decode_status(frame.text());
            if (!d) return violation("bad STATUS payload: " + d.error, events);
            replied_ = true;
            events.emplace_back(Status{std::move(*d.value), std::string(frame.text())});
            return;
        }
        case FrameType::Start:
        case FrameType::Input:
        case FrameType::Resize:
        case FrameType::Signal:
        case FrameType::Stop:
        case FrameType::StatusRequest:
        default: break;
    }
    violation("the daemon sent an unexpected " + name + " frame", events);
}

}  // namespace ptyvisor::client
