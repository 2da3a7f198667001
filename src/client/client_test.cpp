// Tests of the client library against a fake daemon written here: one end of a socketpair
// is the Connection, the other is read and written by the test with the protocol library.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <string>
#include <vector>

#include "client/client.h"
#include "common/linux.h"
#include "common/testing/as_nobody.h"
#include "protocol/fd_passing.h"
#include "protocol/frame.h"
#include "protocol/frame_decoder.h"
#include "protocol/payloads.h"

namespace ptyvisor::client {
namespace {

using namespace std::chrono_literals;
using protocol::Frame;
using protocol::FrameType;

struct Pair {
    Connection client;
    UniqueFd server;
};

std::size_t open_fds() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

Pair make_pair() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
    Pair pair;
    std::string why;
    if (!pair.client.adopt(UniqueFd(sv[0]), why)) std::abort();
    pair.server.reset(sv[1]);
    return pair;
}

// Connection::start(), which must succeed.
void start(Connection& client, const StartOptions& options) {
    std::string why;
    EXPECT_TRUE(client.start(options, why)) << why;
}

// run_to_completion() within 5 s, which must succeed.
Transcript complete(Connection& client) {
    Transcript t;
    std::string why;
    EXPECT_TRUE(run_to_completion(client, 5s, t, why)) << why;
    return t;
}

// What one read_events() returns, which must succeed.
std::vector<Event> read_once(Connection& client) {
    std::vector<Event> events;
    std::string why;
    EXPECT_TRUE(client.read_events(events, why)) << why;
    return events;
}

// The fake daemon's reading side: frames plus every descriptor that came with them.
struct FakeServer {
    int fd;
    protocol::FrameDecoder decoder;
    std::vector<UniqueFd> fds;

    // Reads until a whole frame is decoded; fails the test after 5 s.
    Frame next_frame() {
        Frame frame;
        std::vector<std::uint8_t> buffer(128 * 1024);
        for (;;) {
            const auto status = decoder.next(frame);
            if (status == protocol::FrameDecoder::Status::Ready) return frame;
            EXPECT_NE(status, protocol::FrameDecoder::Status::Failed);
            if (status == protocol::FrameDecoder::Status::Failed) return {};
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 5000) != 1) {
                ADD_FAILURE() << "no frame arrived";
                return {};
            }
            auto r = protocol::receive_with_fds(fd, buffer);
            if (r.error == -EAGAIN) continue;
            EXPECT_EQ(r.error, 0);
            if (r.eof || r.error != 0) {
                ADD_FAILURE() << "client closed before a whole frame";
                return {};
            }
            for (auto& f : r.fds) fds.push_back(std::move(f));
            decoder.feed(std::span<const std::uint8_t>(buffer.data(), r.bytes));
        }
    }

    // Reads frames while the client flushes, until the client's queue is empty and `count`
    // frames have arrived. Needed when the frames exceed the socket buffer.
    std::vector<Frame> pump(Connection& client, std::size_t count) {
        std::vector<Frame> frames;
        std::vector<std::uint8_t> buffer(128 * 1024);
        Frame frame;
        while (frames.size() < count) {
            client.flush();
            while (decoder.next(frame) == protocol::FrameDecoder::Status::Ready)
                frames.push_back(std::move(frame));
            if (frames.size() >= count) break;
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 5000) != 1) {
                ADD_FAILURE() << "frames stopped arriving after " << frames.size();
                break;
            }
            auto r = protocol::receive_with_fds(fd, buffer);
            for (auto& f : r.fds) fds.push_back(std::move(f));
            decoder.feed(std::span<const std::uint8_t>(buffer.data(), r.bytes));
        }
        return frames;
    }
};

void send_frame(int fd, FrameType type, std::string_view payload) {
    const auto bytes = protocol::encode_frame(type, payload);
    ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

void send_raw(int fd, std::string_view bytes) {
    ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// Reads events until the connection finishes; fails after 5 s.
std::vector<Event> all_events(Connection& c) {
    std::vector<Event> all;
    std::vector<Event> events;
    std::string why;
    while (!c.finished()) {
        if (!wait_for_events(c, 5s, events, why)) {
            ADD_FAILURE() << why;
            break;
        }
        if (events.empty()) {
            ADD_FAILURE() << "connection did not finish";
            break;
        }
        for (auto& e : events) all.push_back(std::move(e));
    }
    return all;
}

bool nothing_to_read(int fd) {
    char byte;
    return ::recv(fd, &byte, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

StartOptions sample_options() {
    StartOptions o;
    o.argv = {"sh", "-c", "echo héllo"};
    o.env = {"PATH=/usr/bin:/bin", "A=b=c", "EMPTY="};
    o.term = "xterm-256color";
    o.size = {.rows = 40, .cols = 132};
    o.cwd = std::filesystem::temp_directory_path();
    return o;
}

std::string session_started() { return protocol::encode(protocol::Started{"ptyvisor-abc.service", 42, {}}); }

TEST(ClientStart, CarriesExactlyOneDirectoryFdMatchingDevIno) {
    auto [client, server_fd] = make_pair();
    FakeServer server{server_fd.get(), {}, {}};
    const auto options = sample_options();
    start(client, options);

    const Frame frame = server.next_frame();
    ASSERT_EQ(frame.type, FrameType::Start);
    ASSERT_EQ(server.fds.size(), 1u);
    const auto decoded = protocol::decode_start(frame.text());
    ASSERT_TRUE(decoded) << decoded.error;
    EXPECT_EQ(decoded.value->argv, options.argv);
    EXPECT_EQ(decoded.value->env, options.env);
    EXPECT_EQ(decoded.value->term, options.term);
    EXPECT_EQ(decoded.value->size, options.size);

    struct stat received {}, expected {};
    ASSERT_EQ(::fstat(server.fds[0].get(), &received), 0);
    ASSERT_EQ(::stat(options.cwd.c_str(), &expected), 0);
    EXPECT_TRUE(S_ISDIR(received.st_mode));
    EXPECT_EQ(received.st_dev, expected.st_dev);
    EXPECT_EQ(received.st_ino, expected.st_ino);
    EXPECT_EQ(decoded.value->cwd_dev, expected.st_dev);
    EXPECT_EQ(decoded.value->cwd_ino, expected.st_ino);
    // The descriptor is opened read-only: the daemon gets proof of access, not write access.
    EXPECT_EQ(::fcntl(server.fds[0].get(), F_GETFL) & O_ACCMODE, O_RDONLY);
    EXPECT_TRUE(nothing_to_read(server.fd));
}

// Another process of the account has filled the account's descriptors in flight, and the
// hard limit leaves no room to retry: START fails with a message that names the cause.
TEST(ClientStart, DescriptorsInFlightExhaustedIsExplained) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root, to drop to another account";
    const int code = testing::run_as_nobody([] {
        int stuffed[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, stuffed) != 0) return 10;
        auto [client, server_fd] = make_pair();
        std::vector<UniqueFd> copies;
        for (int i = 0; i < SCM_MAX_FD; ++i) copies.emplace_back(::dup(stuffed[0]));
        // No room to raise, a little above what is open (the sanitizers need a few
        // descriptors of their own), far below what two messages of copies put in flight.
        const auto soft = static_cast<rlim_t>(open_fds() + 16);
        const rlimit tight{soft, soft};
        if (::setrlimit(RLIMIT_NOFILE, &tight) != 0) return 11;
        // 253 copies a message into a socket nobody reads, until the kernel refuses more.
        bool refused = false;
        for (int i = 0; i < 8 && !refused; ++i) {
            std::vector<int> raw;
            for (const auto& c : copies) raw.push_back(c.get());
            char byte = 'x';
            iovec iov{&byte, 1};
            alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * SCM_MAX_FD)];
            msghdr msg{};
            msg.msg_iov = &iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control;
            msg.msg_controllen = sizeof control;
            cmsghdr* c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * raw.size());
            std::memcpy(CMSG_DATA(c), raw.data(), sizeof(int) * raw.size());
            refused = ::sendmsg(stuffed[1], &msg, MSG_NOSIGNAL) < 0 && errno == ETOOMANYREFS;
        }
        if (!refused) return 12;
        copies.clear();  // what is in flight stays in flight; the client needs room to open "/"
        StartOptions o = sample_options();
        o.cwd = "/";
        std::string why;
        if (client.start(o, why)) return 15;
        return why.find("ETOOMANYREFS") != std::string::npos ? 0 : 13;
    });
    EXPECT_EQ(code, 0) << "see the numbered steps in the test";
}

TEST(ClientStart, BorrowedDirectoryFdIsSentAndStaysOpen) {
    auto [client, server_fd] = make_pair();
    FakeServer server{server_fd.get(), {}, {}};
    UniqueFd dir(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir);
    auto options = sample_options();
    options.cwd = "/nonexistent-ignored";
    options.cwd_fd = dir.get();
    start(client, options);

    const Frame frame = server.next_frame();
    ASSERT_EQ(server.fds.size(), 1u);
    const auto decoded = protocol::decode_start(frame.text());
    ASSERT_TRUE(decoded);
    struct stat root {};
    ASSERT_EQ(::stat("/", &root), 0);
    EXPECT_EQ(decoded.value->cwd_ino, root.st_ino);
    EXPECT_GE(::fcntl(dir.get(), F_GETFD), 0) << "the caller's descriptor must stay open";
}

TEST(ClientStart, RejectsInvalidOptionsBeforeSendingAnything) {
    const auto expect_refused = [](StartOptions options, const std::string& fragment) {
        auto [client, server_fd] = make_pair();
        std::string why;
        EXPECT_FALSE(client.start(options, why)) << "accepted options that should fail with: " << fragment;
        EXPECT_NE(why.find(fragment), std::string::npos) << why;
        EXPECT_TRUE(nothing_to_read(server_fd.get()));
    };
    auto o = sample_options();
    o.argv = {"echo", std::string("\xff\xfe")};
    expect_refused(o, "argument 1 is not valid UTF-8");
    o = sample_options();
    o.argv = {};
    expect_refused(o, "no command");
    o = sample_options();
    o.env = {"NOEQUALS"};
    expect_refused(o, "NOEQUALS");
    o = sample_options();
    o.env = {"BAD=\xc0\x80"};
    expect_refused(o, "environment variable BAD is not valid UTF-8");
    o = sample_options();
    o.cwd = "/nonexistent/ptyvisor-test";
    expect_refused(o, "cannot open directory /nonexistent/ptyvisor-test: No such file or directory");
    o = sample_options();
    o.argv = {"echo", std::string(300 * 1024, 'x')};
    expect_refused(o, "too large");
}

TEST(ClientInput, SplitsAtTheMaximumIoPayload) {
    auto [client, server_fd] = make_pair();
    FakeServer server{server_fd.get(), {}, {}};
    start(client, sample_options());
    ASSERT_EQ(server.next_frame().type, FrameType::Start);

    std::string input(2 * protocol::kMaxIoPayloadSize + 5, '\0');
    for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<char>(i * 7 + i / 251);
    client.queue_input(input);
    client.queue_input(std::string_view{});  // empty input queues nothing
    EXPECT_EQ(client.pending_output_bytes(), input.size() + 3 * protocol::kHeaderSize);
    EXPECT_TRUE(client.wants_write());

    const auto frames = server.pump(client, 3);
    ASSERT_EQ(frames.size(), 3u);
    std::string received;
    for (const auto& f : frames) {
        EXPECT_EQ(f.type, FrameType::Input);
        received += f.text();
    }
    EXPECT_EQ(frames[0].payload.size(), protocol::kMaxIoPayloadSize);
    EXPECT_EQ(frames[1].payload.size(), protocol::kMaxIoPayloadSize);
    EXPECT_EQ(frames[2].payload.size(), 5u);
    EXPECT_EQ(received, input);
    EXPECT_FALSE(client.wants_write());
    EXPECT_EQ(client.pending_output_bytes(), 0u);
    EXPECT_TRUE(nothing_to_read(server.fd));
    EXPECT_TRUE(server.fds.size() == 1u) << "only START carries a descriptor";
}

TEST(ClientInput, OutputFullAboveTheLimit) {
    auto [client, server_fd] = make_pair();
    start(client, sample_options());
    client.queue_input(std::string(Connection::kOutgoingLimit - 1000, 'a'));
    EXPECT_FALSE(client.output_full());
    client.queue_input(std::string(1000, 'b'));
    EXPECT_TRUE(client.output_full());
}

TEST(ClientControl, ResizeSignalStopEncodings) {
    auto [client, server_fd] = make_pair();
    FakeServer server{server_fd.get(), {}, {}};
    start(client, sample_options());
    client.queue_resize({.rows = 50, .cols = 200});
    client.queue_signal({.signal = SIGINT, .target = protocol::SignalTarget::Foreground});
    client.queue_signal({.signal = SIGTERM, .target = protocol::SignalTarget::Session});
    client.queue_stop();
    EXPECT_TRUE(client.flush());

    ASSERT_EQ(server.next_frame().type, FrameType::Start);
    const Frame resize = server.next_frame();
    ASSERT_EQ(resize.type, FrameType::Resize);
    const auto size = protocol::decode_resize(resize.text());
    ASSERT_TRUE(size) << size.error;
    EXPECT_EQ(*size.value, (protocol::WindowSize{.rows = 50, .cols = 200}));

    const Frame sig1 = server.next_frame();
    ASSERT_EQ(sig1.type, FrameType::Signal);
    const auto s1 = protocol::decode_signal(sig1.text());
    ASSERT_TRUE(s1);
    EXPECT_EQ(s1.value->signal, SIGINT);
    EXPECT_EQ(s1.value->target, protocol::SignalTarget::Foreground);
    const auto s2 = protocol::decode_signal(server.next_frame().text());
    ASSERT_TRUE(s2);
    EXPECT_EQ(s2.value->signal, SIGTERM);
    EXPECT_EQ(s2.value->target, protocol::SignalTarget::Session);

    const Frame stop = server.next_frame();
    EXPECT_EQ(stop.type, FrameType::Stop);
    EXPECT_TRUE(stop.payload.empty());
    EXPECT_THROW(client.queue_signal({.signal = 0}), std::invalid_argument);
}

TEST(ClientControl, SessionRequestsBeforeStartAreRefused) {
    auto [client, server_fd] = make_pair();
    EXPECT_THROW(client.queue_input(std::string_view("x")), std::logic_error);
    EXPECT_THROW(client.queue_stop(), std::logic_error);
    start(client, sample_options());
    std::string why;
    EXPECT_THROW(client.start(sample_options(), why), std::logic_error);
    EXPECT_THROW(client.queue_status_request(), std::logic_error);
}

TEST(ClientEvents, StartedOutputExitThenClosed) {
    auto [client, server_fd] = make_pair();
    start(client, sample_options());
    send_frame(server_fd.get(), FrameType::Started, session_started());
    send_frame(server_fd.get(), FrameType::Output, "hello ");
    send_frame(server_fd.get(), FrameType::Output, "world\r\n");
    protocol::ExitStatus status;
    status.kind = protocol::ExitStatus::Kind::Signaled;
    status.signal = 9;
    status.unit_result = "signal";
    status.reason = protocol::ExitReason::Stopped;
    send_frame(server_fd.get(), FrameType::Exit, protocol::encode(status));
    server_fd.reset();

    const auto events = all_events(client);
    ASSERT_EQ(events.size(), 5u);
    EXPECT_EQ(std::get<Started>(events[0]), (Started{"ptyvisor-abc.service", 42, {}}));
    EXPECT_EQ(std::get<Output>(events[1]).bytes, (std::vector<std::uint8_t>{'h', 'e', 'l', 'l', 'o', ' '}));
    EXPECT_EQ(std::get<Output>(events[2]).bytes.size(), 7u);
    EXPECT_EQ(std::get<Exit>(events[3]).status, status);
    EXPECT_EQ(std::get<Exit>(events[3]).status.shell_status(), 137);
    EXPECT_TRUE(std::holds_alternative<Closed>(events[4]));
    EXPECT_TRUE(read_once(client).empty()) << "nothing follows Closed";
}

TEST(ClientEvents, RunToCompletionGathersATranscript) {
    auto [client, server_fd] = make_pair();
    start(client, sample_options());
    send_frame(server_fd.get(), FrameType::Started, session_started());
    const std::string big(3 * protocol::kMaxIoPayloadSize, 'z');
    for (std::size_t i = 0; i < 3; ++i)
        send_frame(server_fd.get(), FrameType::Output,
                   std::string_view(big).substr(i * protocol::kMaxIoPayloadSize, protocol::kMaxIoPayloadSize));
    protocol::ExitStatus status;
    status.kind = protocol::ExitStatus::Kind::Exited;
    status.code = 3;
    send_frame(server_fd.get(), FrameType::Exit, protocol::encode(status));
    server_fd.reset();

    const auto t = complete(client);
    ASSERT_TRUE(t.started);
    EXPECT_EQ(t.output, big);
    ASSERT_TRUE(t.exit);
    EXPECT_EQ(t.exit->shell_status(), 3);
    EXPECT_TRUE(t.closed);
    EXPECT_FALSE(t.violation);
}

TEST(ClientEvents, ErrorThenClosed) {
    auto [client, server_fd] = make_pair();
    start(client, sample_options());
    send_frame(server_fd.get(), FrameType::Error,
               protocol::encode(protocol::ErrorReply{protocol::ErrorCode::Busy, "all 16 session slots are in use"}));
    server_fd.reset();
    const auto t = complete(client);
    ASSERT_TRUE(t.error);
    EXPECT_EQ(t.error->code, protocol::ErrorCode::Busy);
    EXPECT_EQ(t.error->message, "all 16 session slots are in use");
    EXPECT_TRUE(t.closed);
    EXPECT_FALSE(t.started);
}

TEST(ClientEvents, ErrorIsReadAfterTheDaemonClosedBeforeStart) {
    // The daemon may refuse at accept time (overloaded) and close before reading START.
    auto [client, server_fd] = make_pair();
    send_frame(server_fd.get(), FrameType::Error,
               protocol::encode(protocol::ErrorReply{protocol::ErrorCode::Overloaded, "too many"}));
    ::shutdown(server_fd.get(), SHUT_RDWR);
    start(client, sample_options());  // must succeed: the ERROR is what matters
    client.queue_input(std::string_view("x"));
    EXPECT_TRUE(client.flush());
    const auto t = complete(client);
    ASSERT_TRUE(t.error);
    EXPECT_EQ(t.error->code, protocol::ErrorCode::Overloaded);
}

TEST(ClientEvents, StatusRequestAndReply) {
    auto [client, server_fd] = make_pair();
    FakeServer server{server_fd.get(), {}, {}};
    client.queue_status_request();
    EXPECT_TRUE(client.flush());
    const Frame request = server.next_frame();
    EXPECT_EQ(request.type, FrameType::StatusRequest);
    EXPECT_TRUE(request.payload.empty());
    EXPECT_TRUE(server.fds.empty());

    // Larger than one read: the decoder must reassemble it. "pad" is a member from a newer
    // daemon: ignored by the decoder, kept in the verbatim JSON.
    protocol::StatusReply reply;
    reply.version = "0.1.0";
    reply.backend = "direct";
    reply.sessions.push_back({"u.service", 5, 4, 1714557600, 1, 2, "bash", {}, 0, false});
    reply.counters.accepted = 3;
    std::string json = protocol::encode(reply);
    json.insert(1, R"("pad":")" + std::string(200 * 1024, 'p') + "\",");
    std::thread writer([&] { send_frame(server_fd.get(), FrameType::Status, json); server_fd.reset(); });
    const auto t = complete(client);
    writer.join();
    ASSERT_TRUE(t.status) << t.violation.value_or("");
    EXPECT_EQ(t.status->reply, reply);
    EXPECT_EQ(t.status->json, json);
    EXPECT_TRUE(t.closed);
}

TEST(ClientViolations, MalformedStatusReply) {
    auto [client, server_fd] = make_pair();
    client.queue_status_request();
    EXPECT_TRUE(client.flush());
    send_frame(server_fd.get(), FrameType::Status, R"({"version":"0.1.0","backend":"direct","sessions":[{}]})");
    server_fd.reset();
    const auto t = complete(client);
    EXPECT_FALSE(t.status);
    ASSERT_TRUE(t.violation);
    EXPECT_EQ(*t.violation, "bad STATUS payload: 'sessions' entry 0: 'unit' is missing");
}

TEST(ClientViolations, GarbageYieldsOneViolation) {
    auto [client, server_fd] = make_pair();
    start(client, sample_options());
    send_raw(server_fd.get(), "HTTP/1.1 400 Bad Request\r\n\r\n");
    const auto events = all_events(client);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_NE(std::get<ProtocolViolation>(events[0]).message.find("bad frame"), std::string::npos);
    EXPECT_TRUE(read_once(client).empty());
}

TEST(ClientViolations, OffProtocolFramesAreViolations) {
    const auto violation_after = [](const std::vector<std::pair<FrameType, std::string>>& frames) {
        auto [client, server_fd] = make_pair();
        start(client, sample_options());
        for (const auto& [type, payload] : frames) send_frame(server_fd.get(), type, payload);
        server_fd.reset();
        const auto t = complete(client);
        return t.violation.value_or("");
    };
    protocol::ExitStatus exited;
    exited.kind = protocol::ExitStatus::Kind::Exited;
    EXPECT_NE(violation_after({{FrameType::Output, "x"}}).find("unexpected OUTPUT"), std::string::npos);
    EXPECT_NE(violation_after({{FrameType::Started, session_started()}, {FrameType::Started, session_started()}})
                  .find("unexpected STARTED"),
              std::string::npos);
    EXPECT_NE(violation_after({{FrameType::Started, session_started()},
                               {FrameType::Exit, protocol::encode(exited)},
                               {FrameType::Output, "late"}})
                  .find("after its last frame"),
              std::string::npos);
    EXPECT_NE(violation_after({{FrameType::Started, R"({"unit":5})"}}).find("bad STARTED payload"),
              std::string::npos);
    EXPECT_NE(violation_after({{FrameType::Input, "x"}}).find("unexpected INPUT"), std::string::npos);
    EXPECT_NE(violation_after({{FrameType::Status, "{}"}}).find("unexpected STATUS"), std::string::npos);
    EXPECT_NE(violation_after({{FrameType::Started, session_started()}, {FrameType::Exit, "not json"}})
                  .find("bad EXIT payload"),
              std::string::npos);
}

TEST(ClientViolations, EofInTheMiddleOfAFrame) {
    auto [client, server_fd] = make_pair();
    start(client, sample_options());
    const auto frame = protocol::encode_frame(FrameType::Output, "truncated");
    ASSERT_EQ(::send(server_fd.get(), frame.data(), frame.size() - 3, MSG_NOSIGNAL), static_cast<ssize_t>(frame.size() - 3));
    server_fd.reset();
    const auto t = complete(client);
    ASSERT_TRUE(t.violation);
    EXPECT_NE(t.violation->find("middle of a frame"), std::string::npos);
    EXPECT_FALSE(t.closed);
}

TEST(ClientViolations, DescriptorsFromTheDaemonAreClosed) {
    ::signal(SIGPIPE, SIG_IGN);
    auto [client, server_fd] = make_pair();
    start(client, sample_options());
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    UniqueFd read_end(p[0]), write_end(p[1]);
    const auto frame = protocol::encode_frame(FrameType::Started, session_started());
    ASSERT_EQ(protocol::send_with_fd(server_fd.get(), frame, read_end.get()), 0);
    read_end.reset();  // now the client holds the only read end

    const auto t = complete(client);
    ASSERT_TRUE(t.violation);
    EXPECT_NE(t.violation->find("file descriptors"), std::string::npos);
    // With every read end closed, writing to the pipe fails: the client did close it.
    EXPECT_EQ(::write(write_end.get(), "x", 1), -1);
    EXPECT_EQ(errno, EPIPE);
}

TEST(ClientWrite, FailureAfterTheDaemonLeftIsKeptNotThrown) {
    auto [client, server_fd] = make_pair();
    start(client, sample_options());
    server_fd.reset();
    client.queue_input(std::string(1000, 'a'));
    EXPECT_TRUE(client.flush());
    EXPECT_EQ(client.write_error(), -EPIPE);
    EXPECT_FALSE(client.wants_write());
    client.queue_stop();  // dropped: nobody reads
    EXPECT_FALSE(client.wants_write());
    const auto events = all_events(client);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_TRUE(std::holds_alternative<Closed>(events[0]));
}

TEST(ClientConnect, ReportsPathAndReason) {
    Connection client;
    std::string why;
    EXPECT_FALSE(client.connect("/nonexistent/ptyvisor.sock", why)) << "connected to a missing socket";
    EXPECT_EQ(why, "cannot connect to /nonexistent/ptyvisor.sock: No such file or directory");
    EXPECT_FALSE(client.connect(std::string(200, 'x'), why));
    EXPECT_EQ(why, "cannot connect to " + std::string(200, 'x') + ": invalid socket path");
    EXPECT_EQ(client.fd(), -1);
}

// A listening Unix socket at a fresh path in the temporary directory, that nobody accepts on.
UniqueFd listen_at(const std::filesystem::path& path, int backlog) {
    std::filesystem::remove(path);
    UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
    EXPECT_EQ(::listen(listener.get(), backlog), 0) << std::strerror(errno);
    return listener;
}

TEST(ClientConnect, ConnectsToAListeningSocketNonBlocking) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("ptyvisor-client-test-" + std::to_string(::getpid()) + ".sock");
    const UniqueFd listener = listen_at(path, 1);
    Connection client;
    std::string why;
    ASSERT_TRUE(client.connect(path.string(), why)) << why;
    std::filesystem::remove(path);
    const int flags = ::fcntl(client.fd(), F_GETFL);
    EXPECT_TRUE(flags & O_NONBLOCK);
    EXPECT_TRUE(::fcntl(client.fd(), F_GETFD) & FD_CLOEXEC);
    EXPECT_TRUE(read_once(client).empty()) << "nothing sent yet: no events, no block";
}

// Issue 24, item 2: a blocking connect() to a full listen queue waited without limit, and
// `ptyvisor run` had blocked the signals that could have ended it.
TEST(ClientConnect, AFullListenQueueIsGivenUpAtTheDeadline) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("ptyvisor-client-full-" + std::to_string(::getpid()) + ".sock");
    const UniqueFd listener = listen_at(path, 0);
    // Never accepted: the queue is full once one connection waits in it.
    std::vector<Connection> queued(2);
    std::string why;
    std::size_t connected = 0;
    for (auto& c : queued)
        if (c.connect(path.string(), why, std::chrono::milliseconds(200))) ++connected;
    ASSERT_GE(connected, 1u) << why;
    Connection late;
    EXPECT_FALSE(late.connect(path.string(), why, std::chrono::milliseconds(300)));
    EXPECT_NE(why.find("accepted no connection"), std::string::npos) << why;
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace ptyvisor::client

namespace ptyvisor::client {
namespace {

// Requests of version 4 go in version 4; every other request in version 3, which a daemon of
// version 3 still serves.
TEST(ClientVersion, OnlyVersion4RequestsSpeakVersion4) {
    const std::string id(32, 'b');
    const auto first_frame = [](const std::function<void(Connection&)>& queue) {
        auto [client, server_fd] = make_pair();
        FakeServer server{server_fd.get(), {}, {}};
        queue(client);
        EXPECT_TRUE(client.flush());
        return server.next_frame();
    };
    std::string why;
    auto frame = first_frame([](Connection& c) { c.queue_list(); });
    EXPECT_EQ(frame.version, 3);
    frame = first_frame([&](Connection& c) { EXPECT_TRUE(c.queue_exec({id, "make", 1000, false}, why)) << why; });
    EXPECT_EQ(frame.type, FrameType::Exec);
    EXPECT_EQ(frame.version, 4);
    frame = first_frame([&](Connection& c) { EXPECT_TRUE(c.queue_commands({id, 2}, why)) << why; });
    EXPECT_EQ(frame.version, 4);
    protocol::WaitRequest wait;
    wait.id = id;
    frame = first_frame([&](Connection& c) { EXPECT_TRUE(c.queue_wait(wait, why)) << why; });
    EXPECT_EQ(frame.version, 3) << "a wait for exit";
    wait.what = protocol::WaitRequest::For::Input;
    frame = first_frame([&](Connection& c) { EXPECT_TRUE(c.queue_wait(wait, why)) << why; });
    EXPECT_EQ(frame.version, 4) << "a wait for input";
}

TEST(ClientVersion, ExecRefusesALineThatIsNotOne) {
    auto [client, server_fd] = make_pair();
    std::string why;
    EXPECT_FALSE(client.queue_exec({std::string(32, 'b'), "a\nb", 1000, false}, why));
    EXPECT_FALSE(why.empty());
    EXPECT_FALSE(client.queue_exec({std::string(32, 'b'), "ls", 0, false}, why));
    EXPECT_FALSE(client.wants_write()) << "nothing queued";
}

TEST(ClientVersion, ExecutedIsDecoded) {
    auto [client, server_fd] = make_pair();
    std::string why;
    ASSERT_TRUE(client.queue_exec({std::string(32, 'b'), "true", 1000, false}, why)) << why;
    client.flush();
    protocol::ExecReply reply;
    reply.id = std::string(32, 'b');
    reply.exit_code = 0;
    reply.offset = 99;
    std::thread writer([&] { send_frame(server_fd.get(), FrameType::Executed, protocol::encode(reply)); server_fd.reset(); });
    const auto t = complete(client);
    writer.join();
    ASSERT_TRUE(t.executed) << t.violation.value_or("");
    EXPECT_EQ(*t.executed, reply);
    EXPECT_TRUE(t.closed);
}

}  // namespace
}  // namespace ptyvisor::client
